"""Hydration beyond the focus: instances read their own properties from their own resource,
follow references (a contained or separately read Medication, a Condition's Encounter), and
inverse properties let rules about an order reach its patient."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from app.fhir.hydrate import hydrate
from app.fhir.hydration import Hydration
from app.ontology import verify
from app.ontology.model import Ontology
from app.world import World
from app.world.facts import AddInstance, Assert
from tests.language.conftest import RX, SCT, L

NOW = datetime(2025, 6, 1, 12, tzinfo=UTC)

ORDERS = """
:Patient a horis:Class .
:Order a horis:Class ; rdfs:label "medication order" .
:Condition a horis:Class .
:Encounter a horis:Class .
:age a horis:Property ; horis:domain :Patient ; horis:range xsd:integer ; horis:cardinality "0..1" ;
    horis:fromFhir [ horis:resourceType "Patient" ; horis:fhirPath "birthDate" ;
                     horis:transform horis:YearsSince ] .
:hasOrder a horis:Property ; horis:domain :Patient ; horis:range :Order ;
    horis:fromFhir [ horis:resourceType "MedicationRequest" ; horis:fhirPath "id" ;
                     horis:pick horis:All ] .
:hasDraft a horis:Property ; horis:domain :Patient ; horis:range :Order ;
    horis:fromFhir [ horis:resourceType "MedicationRequest" ; horis:fhirPath "id" ;
                     horis:fromContext "draftOrders" ; horis:pick horis:All ] .
:hasCondition a horis:Property ; horis:domain :Patient ; horis:range :Condition ;
    horis:fromFhir [ horis:resourceType "Condition" ; horis:fhirPath "id" ; horis:pick horis:All ] .
:orderFor a horis:Property ; horis:domain :Order ; horis:range :Patient ;
    horis:inverseOf :hasOrder , :hasDraft .
:medication a horis:Property ; horis:domain :Order ; horis:range xsd:string ;
    horis:absentMeans horis:None ;
    horis:fromFhir [ horis:resourceType "MedicationRequest" ;
                     horis:fhirPath "medicationCodeableConcept" ; horis:pick horis:All ] ,
                   [ horis:resourceType "MedicationRequest" ; horis:via "medicationReference" ;
                     horis:fhirPath "code" ; horis:pick horis:All ] .
:authored a horis:Property ; horis:domain :Order ; horis:range xsd:date ; horis:cardinality "0..1" ;
    horis:fromFhir [ horis:resourceType "MedicationRequest" ; horis:fhirPath "authoredOn" ] .
:validityDays a horis:Property ; horis:domain :Order ; horis:range xsd:integer ;
    horis:cardinality "0..1" ;
    horis:fromFhir [ horis:resourceType "MedicationRequest" ;
                     horis:fhirPath "dispenseRequest.validityPeriod" ;
                     horis:transform horis:PeriodDays ] .
:supplyDays a horis:Property ; horis:domain :Order ; horis:range xsd:decimal ; horis:unit "d" ;
    horis:cardinality "0..1" ;
    horis:fromFhir [ horis:resourceType "MedicationRequest" ;
                     horis:fhirPath "dispenseRequest.expectedSupplyDuration" ] .
:code a horis:Property ; horis:domain :Condition ; horis:range xsd:string ;
    horis:fromFhir [ horis:resourceType "Condition" ; horis:fhirPath "code" ;
                     horis:pick horis:All ] .
:diagnosedAt a horis:Property ; horis:domain :Condition ; horis:range :Encounter ;
    horis:fromFhir [ horis:resourceType "Condition" ; horis:fhirPath "encounter" ] .
:hasDiagnosis a horis:Property ; horis:domain :Encounter ; horis:range :Condition ;
    horis:inverseOf :diagnosedAt .
:adultOpioid a horis:Property ; horis:domain :Order ; horis:range xsd:boolean ;
    horis:cardinality "0..1" ; horis:assignedBy horis:RulesOnly .
:AdultOpioid a horis:Rule ; horis:about :Order ;
    horis:when ( [ horis:property :medication ; horis:inValueSet <http://example.org/vs/opioids> ]
                 [ horis:path ( :orderFor :age ) ; horis:atLeast 18 ] ) ;
    horis:then [ horis:property :adultOpioid ; horis:value true ] .
"""


def order(oid: str, **extra: Any) -> dict[str, Any]:
    return {
        "resourceType": "MedicationRequest",
        "id": oid,
        "status": "active",
        "intent": "order",
        "subject": {"reference": "Patient/p"},
        **extra,
    }


def bundle(*resources: dict[str, Any]) -> dict[str, Any]:
    return {"resourceType": "Bundle", "entry": [{"resource": r} for r in resources]}


PATIENT = {"resourceType": "Patient", "id": "p", "birthDate": "1980-02-01"}
CONTAINED = order(
    "mr-contained",
    contained=[
        {
            "resourceType": "Medication",
            "id": "med",
            "code": {"coding": [{"system": RX, "code": "1049502"}]},
        }
    ],
    medicationReference={"reference": "#med"},
    authoredOn="2023-05-01T00:00:00-06:00",
    dispenseRequest={
        "validityPeriod": {
            "start": "2023-05-01T00:00:00-06:00",
            "end": "2023-08-01T00:00:00-06:00",
        },
        "expectedSupplyDuration": {
            "value": 2,
            "unit": "wk",
            "system": "http://unitsofmeasure.org",
            "code": "wk",
        },
    },
)
REFERENCED = order("mr-ref", medicationReference={"reference": "Medication/m1"})
MEDICATION = {
    "resourceType": "Medication",
    "id": "m1",
    "meta": {"versionId": "3"},
    "code": {"coding": [{"system": RX, "code": "197696"}]},
}
ENCOUNTER = {
    "resourceType": "Encounter",
    "id": "e1",
    "status": "finished",
    "subject": {"reference": "Patient/p"},
}
CONDITION = {
    "resourceType": "Condition",
    "id": "c1",
    "subject": {"reference": "Patient/p"},
    "encounter": {"reference": "Encounter/e1"},
    "code": {"coding": [{"system": SCT, "code": "363346000"}]},
}


def run(onto: Ontology, data: dict[str, Any], context: dict[str, Any] | None = None) -> Hydration:
    return hydrate(
        onto,
        focus_id="p",
        focus_class=L + "Patient",
        data=data,
        context=context or {},
        now=NOW,
    )


def facts(h: Hydration) -> set[tuple[str, str, Any]]:
    return {
        (c.subject, c.property.rsplit("#", 1)[1], c.value)
        for c in h.changes
        if isinstance(c, Assert)
    }


@pytest.fixture
def onto(deployment: Callable[..., Ontology]) -> Ontology:
    o = deployment(ORDERS)
    assert verify(o) == []
    return o


def test_an_instance_reads_its_own_resource(onto: Ontology) -> None:
    h = run(onto, {"patient": PATIENT, "orders": bundle(CONTAINED)})
    got = facts(h)
    assert ("p", "hasOrder", "mr-contained") in got  # an Order: no code decides that class
    assert ("mr-contained", "medication", f"{RX}|1049502") in got  # via the contained Medication
    assert ("mr-contained", "authored", "2023-05-01") in got  # its day as written
    assert ("mr-contained", "validityDays", 92) in got
    assert ("mr-contained", "supplyDays", Decimal(14)) in got  # UCUM: 2 wk in d
    assert ("mr-contained", "orderFor", "p") in got  # the inverse of hasOrder
    (add,) = [c for c in h.changes if isinstance(c, AddInstance) and c.id == "mr-contained"]
    assert add.class_iri == L + "Order"
    (med,) = [c for c in h.changes if isinstance(c, Assert) and c.property == L + "medication"]
    assert med.source is not None and med.source.reference == "MedicationRequest/mr-contained"


def test_a_reference_is_followed_to_a_resource_the_call_read(onto: Ontology) -> None:
    h = run(onto, {"orders": bundle(REFERENCED), "meds": bundle(MEDICATION)})
    (med,) = [c for c in h.changes if isinstance(c, Assert) and c.property == L + "medication"]
    assert (med.subject, med.value) == ("mr-ref", f"{RX}|197696")
    assert med.source is not None and med.source.reference == "Medication/m1"
    assert med.source.version_id == "3"
    # without the Medication in hand nothing is guessed
    h = run(onto, {"orders": bundle(REFERENCED)})
    assert not [c for c in h.changes if isinstance(c, Assert) and c.property == L + "medication"]
    # and the input status says which reference the call did not bring
    medication = h.inputs.of(L + "medication")
    assert medication.state == "absent"
    assert [r.detail for r in medication.reasons] == [
        "Medication not read: MedicationRequest/mr-ref refers to Medication/m1, which the "
        "service did not receive"
    ]


def test_links_between_instances_and_their_inverse(onto: Ontology) -> None:
    h = run(onto, {"conditions": bundle(CONDITION), "encounters": bundle(ENCOUNTER)})
    got = facts(h)
    assert ("c1", "diagnosedAt", "e1") in got
    assert ("e1", "hasDiagnosis", "c1") in got
    assert any(isinstance(c, AddInstance) and c.id == "e1" for c in h.changes)


def test_rules_about_an_instance_reach_the_focus_through_the_inverse(onto: Ontology) -> None:
    h = run(onto, {"patient": PATIENT, "orders": bundle(CONTAINED, REFERENCED), "m": MEDICATION})
    world = World(onto)
    tx = world.transact(h.changes, provenance="api")
    assert tx.ok, tx.violations
    assert world.value("mr-contained", "adultOpioid") is True
    assert world.value("mr-ref", "adultOpioid") is True
    young = dict(PATIENT, birthDate="2015-01-01")
    h = run(onto, {"patient": young, "orders": bundle(CONTAINED)})
    world = World(onto)
    assert world.transact(h.changes, provenance="api").ok
    assert world.value("mr-contained", "adultOpioid") is None


def test_a_draft_and_a_stored_resource_under_one_id_read_the_draft(onto: Ontology) -> None:
    stored = order("x", medicationCodeableConcept={"coding": [{"system": RX, "code": "104693"}]})
    draft = order("x", medicationCodeableConcept={"coding": [{"system": RX, "code": "197696"}]})
    h = run(onto, {"orders": bundle(stored)}, {"draftOrders": bundle(draft)})
    got = facts(h)
    assert ("x", "medication", f"{RX}|197696") in got
    assert ("x", "medication", f"{RX}|104693") not in got
    assert {("p", "hasOrder", "x"), ("p", "hasDraft", "x")} <= got
    assert [v.code for v in h.violations] == ["duplicate-instance"]
    assert "in the hook context is read" in h.violations[0].message


def test_a_draft_order_is_not_read_as_a_stored_order(
    deployment: Callable[..., Ontology],
) -> None:
    # the draft orders read first: a stored-order mapping read after them must not see them
    has_draft = ORDERS[ORDERS.index(":hasDraft a") : ORDERS.index(":hasCondition a")]
    onto = deployment(has_draft + ORDERS.replace(has_draft, ""))
    draft = order("d1", medicationCodeableConcept={"coding": [{"system": RX, "code": "197696"}]})
    h = run(
        onto, {"patient": PATIENT, "orders": bundle(REFERENCED)}, {"draftOrders": bundle(draft)}
    )
    got = facts(h)
    assert ("p", "hasDraft", "d1") in got
    assert ("p", "hasOrder", "d1") not in got
    assert ("p", "hasOrder", "mr-ref") in got


def test_an_inverse_must_reverse_the_classes(deployment: Callable[..., Ontology]) -> None:
    broken = ORDERS.replace(
        ":hasDiagnosis a horis:Property ; horis:domain :Encounter ; horis:range :Condition ;",
        ":hasDiagnosis a horis:Property ; horis:domain :Encounter ; horis:range :Order ;",
    )
    (problem,) = verify(deployment(broken))
    assert problem.node == L + "hasDiagnosis"
    assert "needs the reverse classes" in problem.message
