"""The Node FHIR test server answers the searches the opioid services' prefetch needs."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support.fhir_server import FhirServer

pytestmark = pytest.mark.fhirserver

RXNORM = "http://www.nlm.nih.gov/research/umls/rxnorm"


def _search(fhir: FhirServer, query: str) -> list[tuple[str, str, str | None]]:
    bundle = httpx.get(f"{fhir.base_url}/{query}", timeout=10).json()
    return [
        (e["resource"]["resourceType"], e["resource"]["id"], (e.get("search") or {}).get("mode"))
        for e in bundle.get("entry") or []
    ]


@pytest.fixture(scope="module")
def patient(fhir_server: FhirServer) -> dict[str, str]:
    pid, med, active, old, lab = (fhir_server.new_id() for _ in range(5))

    def order(oid: str, status: str, authored: str, medication: dict[str, Any]) -> None:
        fhir_server.create(
            {
                "resourceType": "MedicationRequest",
                "id": oid,
                "status": status,
                "intent": "order",
                "subject": {"reference": f"Patient/{pid}"},
                "authoredOn": authored,
                **medication,
            }
        )

    fhir_server.create({"resourceType": "Patient", "id": pid, "birthDate": "1980-01-01"})
    fhir_server.create(
        {
            "resourceType": "Medication",
            "id": med,
            "code": {"coding": [{"system": RXNORM, "code": "197696"}]},
        }
    )
    order(
        active, "active", "2026-01-10", {"medicationReference": {"reference": f"Medication/{med}"}}
    )
    order(
        old,
        "completed",
        "2020-01-10",
        {"medicationCodeableConcept": {"coding": [{"system": RXNORM, "code": "1049502"}]}},
    )
    fhir_server.create(
        {
            "resourceType": "Observation",
            "id": lab,
            "status": "final",
            "code": {"coding": [{"system": "http://loinc.org", "code": "70146-6"}]},
            "subject": {"reference": f"Patient/{pid}"},
            "effectiveDateTime": "2025-09-25",
            "valueString": "POS",
        }
    )
    return {"patient": pid, "medication": med, "active": active, "old": old, "lab": lab}


def test_active_orders_of_a_patient_with_their_medication(
    fhir_server: FhirServer, patient: dict[str, str]
) -> None:
    pid = patient["patient"]
    found = _search(
        fhir_server,
        f"MedicationRequest?patient={pid}&status=active&_include=MedicationRequest:medication",
    )
    assert found == [
        ("MedicationRequest", patient["active"], "match"),
        ("Medication", patient["medication"], "include"),
    ]
    assert {r[1] for r in _search(fhir_server, f"MedicationRequest?patient={pid}")} == {
        patient["active"],
        patient["old"],
    }


def test_date_and_code_filters(fhir_server: FhirServer, patient: dict[str, str]) -> None:
    pid = patient["patient"]
    assert [
        r[1]
        for r in _search(fhir_server, f"MedicationRequest?patient={pid}&authoredon=ge2025-06-01")
    ] == [patient["active"]]
    assert [
        r[1]
        for r in _search(
            fhir_server,
            f"Observation?patient={pid}&code=http://loinc.org|70146-6&date=ge2025-01-01",
        )
    ] == [patient["lab"]]
    assert _search(fhir_server, f"Observation?patient={pid}&date=ge2026-01-01") == []


def test_an_include_of_an_unknown_parameter_is_refused(
    fhir_server: FhirServer, patient: dict[str, str]
) -> None:
    answer = httpx.get(
        f"{fhir_server.base_url}/MedicationRequest?patient={patient['patient']}&_include=MedicationRequest:nothing",
        timeout=10,
    )
    assert answer.status_code == 400
    assert "nothing" in answer.text


def test_a_record_can_be_stored_as_last_changed_in_the_past(fhir_server: FhirServer) -> None:
    plan = {
        "resourceType": "CarePlan",
        "id": fhir_server.new_id(),
        "status": "active",
        "intent": "plan",
        "subject": {"reference": "Patient/x"},
        "meta": {"lastUpdated": "2025-10-17T00:00:00Z"},
    }
    fhir_server.store_as_of(plan)
    assert fhir_server.read("CarePlan", plan["id"])["meta"]["lastUpdated"] == "2025-10-17T00:00:00Z"
    fhir_server.create(plan)  # an ordinary write stamps its own time
    assert fhir_server.read("CarePlan", plan["id"])["meta"]["lastUpdated"] > "2025-10-17"
