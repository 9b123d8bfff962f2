"""Value sets: FHIR ValueSet files beside the ontology, named by canonical URL in conditions,
classes and FHIR mappings; an unknown canonical is a load error."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from app.fhir.hydrate import hydrate
from app.ontology import OntologyError, verify
from app.ontology.model import Ontology
from app.world import AddInstance, Assert, World
from tests.language.conftest import RX, SCT, L

MEDS = """
:Patient a horis:Class .
:Opioid a horis:Class ; horis:inValueSet <http://example.org/vs/opioids> .
:medication a horis:Property ; horis:domain :Patient ; horis:range xsd:string ;
    horis:fromFhir [ horis:resourceType "MedicationRequest" ;
                     horis:fhirPath "medicationCodeableConcept.coding" ; horis:pick horis:All ] .
:onOpioid a horis:Property ; horis:domain :Patient ; horis:range xsd:boolean ;
    horis:cardinality "0..1" ; horis:assignedBy horis:RulesOnly .
:onBenzodiazepine a horis:Property ; horis:domain :Patient ; horis:range xsd:boolean ;
    horis:cardinality "0..1" ; horis:assignedBy horis:RulesOnly .
:terminalDiagnosis a horis:Property ; horis:domain :Patient ; horis:range xsd:string ;
    horis:fromFhir [ horis:resourceType "Condition" ; horis:fhirPath "code.coding" ;
                     horis:inValueSet <http://example.org/vs/terminal> ; horis:pick horis:All ] .
:hasOpioidOrder a horis:Property ; horis:domain :Patient ; horis:range :Opioid ;
    horis:fromFhir [ horis:resourceType "MedicationRequest" ;
                     horis:fhirPath "medicationCodeableConcept" ; horis:pick horis:All ] .
:OnOpioid a horis:Rule ; horis:about :Patient ;
    horis:when [ horis:property :medication ; horis:inValueSet <http://example.org/vs/opioids> ] ;
    horis:then [ horis:property :onOpioid ; horis:value true ] .
:OnBenzodiazepine a horis:Rule ; horis:about :Patient ;
    horis:when [ horis:property :medication ;
                 horis:inValueSet <http://example.org/vs/benzodiazepines> ] ;
    horis:then [ horis:property :onBenzodiazepine ; horis:value true ] .
:palliative a horis:Property ; horis:domain :Patient ; horis:range xsd:boolean ;
    horis:cardinality "0..1" ; horis:assignedBy horis:RulesOnly .
:Palliative a horis:Rule ; horis:about :Patient ;
    horis:when [ horis:property :terminalDiagnosis ; horis:isAssigned true ] ;
    horis:then [ horis:property :palliative ; horis:value true ] .
:OpioidOrdered a horis:Rule ; horis:about :Patient ;
    horis:when [ horis:path ( :hasOpioidOrder ) ; horis:isA :Opioid ] ;
    horis:then [ horis:property :onOpioid ; horis:value true ] .
"""


def test_a_condition_tests_membership_of_a_coding(deployment: Callable[..., Ontology]) -> None:
    onto = deployment(MEDS)
    assert verify(onto) == []
    world = World(onto)
    tx = world.transact(
        [AddInstance("p", L + "Patient"), Assert("p", L + "medication", f"{RX}|197696")],
        provenance="api",
    )
    assert tx.ok
    assert world.value("p", "onOpioid") is True
    assert world.value("p", "onBenzodiazepine") is None
    # the same code in another system is not a member
    world.transact([Assert("p", L + "medication", "http://other|104693")], provenance="api")
    assert world.value("p", "onBenzodiazepine") is None


def test_an_unknown_canonical_is_a_load_error_naming_the_node(
    deployment: Callable[..., Ontology],
) -> None:
    with pytest.raises(OntologyError) as err:
        deployment(MEDS.replace("vs/benzodiazepines", "vs/benzos"))
    (problem,) = err.value.problems
    assert problem.code == "dangling-reference"
    assert problem.node == L + "OnBenzodiazepine"
    assert "http://example.org/vs/benzos" in problem.message


def test_in_value_set_needs_a_coding_valued_property(deployment: Callable[..., Ontology]) -> None:
    onto = deployment(
        MEDS
        + """
:Wrong a horis:Rule ; horis:about :Patient ;
    horis:when [ horis:property :onOpioid ; horis:inValueSet <http://example.org/vs/opioids> ] ;
    horis:then [ horis:property :onBenzodiazepine ; horis:value true ] .
"""
    )
    (problem,) = verify(onto)
    assert problem.node == L + "Wrong" and "needs an xsd:string property" in problem.message


def _request(med: str, *, cid: str = "c1", code: str = "94225005") -> dict[str, object]:
    return {
        "orders": {
            "resourceType": "Bundle",
            "entry": [
                {
                    "resource": {
                        "resourceType": "MedicationRequest",
                        "id": "mr1",
                        "status": "active",
                        "subject": {"reference": "Patient/p"},
                        "medicationCodeableConcept": {"coding": [{"system": RX, "code": med}]},
                    }
                },
                {
                    "resource": {
                        "resourceType": "Condition",
                        "id": cid,
                        "subject": {"reference": "Patient/p"},
                        "code": {"coding": [{"system": SCT, "code": code}]},
                    }
                },
            ],
        }
    }


def test_hydration_filters_by_value_set_and_classifies_by_it(
    deployment: Callable[..., Ontology],
) -> None:
    onto = deployment(MEDS)
    now = datetime(2025, 6, 1, tzinfo=UTC)
    h = hydrate(
        onto, focus_id="p", focus_class=L + "Patient", data=_request("1049502"), context={}, now=now
    )
    facts = {(c.property, c.value) for c in h.changes if isinstance(c, Assert)}
    assert (L + "medication", f"{RX}|1049502") in facts
    assert (L + "terminalDiagnosis", f"{SCT}|94225005") in facts
    assert (L + "hasOpioidOrder", "mr1") in facts  # the order is an :Opioid by its value set
    h = hydrate(
        onto,
        focus_id="p",
        focus_class=L + "Patient",
        data=_request("104693", code="22298006"),
        context={},
        now=now,
    )
    props = {c.property for c in h.changes if isinstance(c, Assert)}
    assert L + "terminalDiagnosis" not in props  # not a member: not read
    assert L + "hasOpioidOrder" not in props  # a benzodiazepine is no :Opioid
