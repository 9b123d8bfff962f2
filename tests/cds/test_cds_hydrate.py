"""FHIR → World changes through the bundled ontologies' horis:fromFhir mappings."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from app.fhir.hydrate import hydrate
from app.fhir.hydration import Hydration
from app.ontology import default_ontology_paths, load_ontology
from app.ontology.model import Ontology
from app.world.facts import AddInstance, Assert

TRI = "https://horismos.dev/example/triage#"
MED = "https://horismos.dev/example/med-safety#"
LOINC = "http://loinc.org"
UCUM = "http://unitsofmeasure.org"
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def onto() -> Ontology:
    return load_ontology(default_ontology_paths())


def obs(oid: str, code: str, value: float, unit: str, when: str, **extra: Any) -> dict[str, Any]:
    return {
        "resourceType": "Observation",
        "id": oid,
        "meta": {"versionId": "7", "lastUpdated": "2025-06-01T11:00:00Z"},
        "status": "final",
        "code": {"coding": [{"system": LOINC, "code": code}]},
        "subject": {"reference": "Patient/p1"},
        "valueQuantity": {
            "value": value,
            "unit": unit,
            "system": "http://unitsofmeasure.org",
            "code": unit,
        },
        "effectiveDateTime": when,
        **extra,
    }


def bundle(*resources: dict[str, Any]) -> dict[str, Any]:
    return {
        "resourceType": "Bundle",
        "type": "searchset",
        "entry": [{"resource": r} for r in resources],
    }


def condition(cid: str, snomed: str, status: str = "active") -> dict[str, Any]:
    return {
        "resourceType": "Condition",
        "id": cid,
        "clinicalStatus": {"coding": [{"code": status}]},
        "category": [{"coding": [{"code": "encounter-diagnosis"}]}],
        "code": {"coding": [{"system": "http://snomed.info/sct", "code": snomed}]},
        "subject": {"reference": "Patient/p1"},
    }


def triage(onto: Ontology, **data: Any) -> Hydration:
    return hydrate(
        onto,
        focus_id="p1",
        focus_class=TRI + "Patient",
        data=data,
        context={"patientId": "p1", "encounterId": "e1"},
        now=NOW,
        texts=onto.service("horismos-triage").text,
    )


def asserted(h: Hydration, prop: str) -> list[Assert]:
    return [c for c in h.changes if isinstance(c, Assert) and c.property == prop]


def test_latest_observation_by_effective_time_wins(onto: Ontology) -> None:
    h = triage(
        onto,
        vitals=bundle(
            obs("hr-old", "8867-4", 80, "/min", "2025-06-01T08:00:00Z"),
            obs("hr-new", "8867-4", 135, "/min", "2025-06-01T11:30:00Z"),
        ),
    )
    [hr] = asserted(h, TRI + "heartRate")
    assert hr.value == Decimal("135")
    assert hr.source is not None and hr.source.id == "hr-new"
    assert hr.source.version_id == "7"
    assert hr.source.last_updated == "2025-06-01T11:00:00Z"


def test_systolic_from_a_blood_pressure_panel_component(onto: Ontology) -> None:
    panel = {
        "resourceType": "Observation",
        "id": "bp1",
        "status": "final",
        "subject": {"reference": "Patient/p1"},
        "code": {"coding": [{"system": LOINC, "code": "85354-9"}]},
        "effectiveDateTime": "2025-06-01T11:00:00Z",
        "component": [
            {
                "code": {"coding": [{"system": LOINC, "code": "8480-6"}]},
                "valueQuantity": {
                    "value": 85,
                    "system": "http://unitsofmeasure.org",
                    "code": "mm[Hg]",
                },
            },
            {
                "code": {"coding": [{"system": LOINC, "code": "8462-4"}]},
                "valueQuantity": {
                    "value": 50,
                    "system": "http://unitsofmeasure.org",
                    "code": "mm[Hg]",
                },
            },
        ],
    }
    [sbp] = asserted(triage(onto, vitals=bundle(panel)), TRI + "systolicBP")
    assert sbp.value == Decimal("85")
    assert sbp.source is not None and sbp.source.id == "bp1"


def test_fahrenheit_converts_to_celsius(onto: Ontology) -> None:
    h = triage(onto, vitals=bundle(obs("t1", "8310-5", 102.2, "[degF]", "2025-06-01T11:00:00Z")))
    [temp] = asserted(h, TRI + "temperature")
    assert temp.value == Decimal("39.0")
    assert temp.unit == "Cel"


def test_unknown_unit_is_a_violation_and_no_fact(onto: Ontology) -> None:
    h = triage(onto, vitals=bundle(obs("t1", "8310-5", 39, "degrees", "2025-06-01T11:00:00Z")))
    assert asserted(h, TRI + "temperature") == []
    [v] = h.violations
    assert v.code == "unit" and v.property == TRI + "temperature"
    assert "Observation/t1" in v.message


def test_unconvertible_unit_is_a_violation(onto: Ontology) -> None:
    h = triage(onto, vitals=bundle(obs("t1", "8310-5", 70, "kg", "2025-06-01T11:00:00Z")))
    assert asserted(h, TRI + "temperature") == []
    assert [v.code for v in h.violations] == ["unit"]


def test_age_in_whole_years_at_the_hook_time(onto: Ontology) -> None:
    patient = {"resourceType": "Patient", "id": "p1", "birthDate": "1960-06-02"}
    [age] = asserted(triage(onto, patient=patient), TRI + "age")
    assert age.value == 64
    focus = h_first(triage(onto, patient=patient))
    assert focus.source is not None and focus.source.reference == "Patient/p1"


def h_first(h: Hydration) -> AddInstance:
    first = h.changes[0]
    assert isinstance(first, AddInstance)
    return first


def test_conditions_become_symptom_instances_through_the_subclass_tree(onto: Ontology) -> None:
    h = triage(
        onto,
        conditions=bundle(
            condition("c1", "29857009"),
            condition("c2", "267036007", status="resolved"),
            condition("c3", "44054006"),  # not a symptom of this deployment
        ),
    )
    instances = [c for c in h.changes if isinstance(c, AddInstance) and c.id != "p1"]
    assert [(i.id, i.class_iri) for i in instances] == [("c1", TRI + "ChestPain")]
    [link] = asserted(h, TRI + "hasSymptom")
    assert link.value == "c1"


def test_chief_complaint_text_and_source_vector(onto: Ontology) -> None:
    encounter = {
        "resourceType": "Encounter",
        "id": "e1",
        "meta": {"versionId": "3"},
        "status": "in-progress",
        "class": {"code": "EMER"},
        "subject": {"reference": "Patient/p1"},
        "reasonCode": [{"text": "crushing chest pain since an hour"}],
    }
    h = triage(onto, encounter=encounter, vitals=None)
    assert h.text == "crushing chest pain since an hour"
    assert [(s.source.reference, s.source.version_id) for s in h.sources] == [("Encounter/e1", "3")]


def test_draft_orders_link_by_has_draft_order_with_their_drug_class(onto: Ontology) -> None:
    rx = "http://www.nlm.nih.gov/research/umls/rxnorm"
    orders = bundle(
        {
            "resourceType": "MedicationRequest",
            "id": "mr1",
            "status": "draft",
            "intent": "order",
            "subject": {"reference": "Patient/p1"},
            "medicationCodeableConcept": {"coding": [{"system": rx, "code": "5640"}]},
        },
        {"resourceType": "NutritionOrder", "id": "n1", "status": "draft", "intent": "order"},
    )
    h = hydrate(
        onto,
        focus_id="p1",
        focus_class=MED + "Patient",
        data={},
        context={"patientId": "p1", "draftOrders": orders},
        now=NOW,
    )
    instances = [(c.id, c.class_iri) for c in h.changes if isinstance(c, AddInstance)]
    assert instances == [("p1", MED + "Patient"), ("mr1", MED + "Ibuprofen")]
    assert [a.value for a in asserted(h, MED + "hasDraftOrder")] == ["mr1"]
    assert [s.source.reference for s in h.sources] == ["MedicationRequest/mr1"]


def test_a_reading_dated_today_east_of_utc_is_not_from_the_future(onto: Ontology) -> None:
    """At 22:30 UTC it is already tomorrow in Sydney: a reading dated tomorrow (a date alone)
    may have been taken there already, so it is read, not refused as from the future; a time
    three hours ahead is."""
    late = datetime(2025, 6, 1, 22, 30, tzinfo=UTC)

    def late_call(reading: dict[str, Any]) -> Hydration:
        return hydrate(
            onto,
            focus_id="p1",
            focus_class=TRI + "Patient",
            data={"vitals": bundle(reading)},
            context={"patientId": "p1", "encounterId": "e1"},
            now=late,
        )

    [hr] = asserted(late_call(obs("hr-d", "8867-4", 90, "/min", "2025-06-02")), TRI + "heartRate")
    assert hr.value == 90
    ahead = late_call(obs("hr-f", "8867-4", 90, "/min", "2025-06-02T01:30:00Z"))
    assert asserted(ahead, TRI + "heartRate") == []
    assert ahead.inputs.of(TRI + "heartRate").state == "refused"
