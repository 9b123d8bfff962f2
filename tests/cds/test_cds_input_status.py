"""Input status as a clinician reading the decision record sees it: for every property the run
read, whether its data came in complete, and if not (absent, refused, stale, truncated) why, in
``GET /runs/{id}`` and on the run's page (real database on both backends, real HTTP through the
ASGI app)."""

from __future__ import annotations

import html
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.cds import clinical as fx
from tests.support.fhir_server import FhirServer

OpenClient = Callable[..., AbstractContextManager[TestClient]]
TRIAGE = "/cds-services/horismos-triage"
MED_SAFETY = "/cds-services/horismos-med-safety"
UNSET: Any = object()
TRIAGE_TTL = Path(__file__).resolve().parents[2] / "ontologies/triage.ttl"


@pytest.fixture
def client(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client(reconcile_interval_seconds=0) as c:
        yield c


def _triage(
    pid: str, vitals: list[dict[str, Any]] | None, conditions: list[dict[str, Any]] | None = UNSET
) -> dict[str, Any]:
    eid = fx.new_id()
    return fx.hook_request(
        "encounter-start",
        {"patientId": pid, "encounterId": eid},
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid),
            "encounter": fx.encounter(eid, pid),
            "vitals": None if vitals is None else fx.searchset(vitals),
            "conditions": fx.searchset([] if conditions is UNSET else conditions)
            if conditions is not None
            else None,
        },
    )


def _inputs(client: TestClient, body: dict[str, Any], path: str = TRIAGE) -> dict[str, Any]:
    """The run's input status by property local name, read back from ``GET /runs/{id}``."""
    answer = client.post(path, json=body)
    assert answer.status_code == 200, answer.text
    run_id = answer.json()["extension"]["dev.horismos.run"]["runId"]
    record = client.get(f"/runs/{run_id}")
    assert record.status_code == 200, record.text
    rows = record.json()["inputs"]
    return {row["property"].rsplit("#", 1)[-1]: row | {"runId": run_id} for row in rows}


def _details(row: dict[str, Any]) -> list[str]:
    return [r["detail"] for r in row["reasons"]]


def test_a_reading_in_a_unit_that_is_not_ucum_is_a_refused_input(client: TestClient) -> None:
    pid = fx.new_id()
    spo2 = fx.observation(pid, "59408-5", 85, "%")
    spo2["valueQuantity"] = {"value": 85, "unit": "mmHg"}  # display text only, no UCUM code
    inputs = _inputs(client, _triage(pid, [spo2, fx.observation(pid, "8867-4", 80, "/min")]))

    assert inputs["spo2"]["state"] == "refused"
    assert _details(inputs["spo2"]) == [
        "Oxygen saturation reading not used: unit 'mmHg' is not a recognized unit "
        "(the reading was 85 mmHg)"
    ]
    assert inputs["spo2"]["reasons"][0]["source"] == f"Observation/{spo2['id']}"
    assert inputs["heartRate"]["state"] == "complete"

    page = client.get(f"/runs/{inputs['spo2']['runId']}", headers={"accept": "text/html"})
    assert page.status_code == 200
    assert "<h3>Inputs" in page.text
    assert "unit 'mmHg' is not a recognized unit" in html.unescape(page.text)  # as it reads
    assert '<span class="st warn">refused</span>' in page.text


def test_a_heart_rate_older_than_six_hours_is_stale_not_a_fact(client: TestClient) -> None:
    pid = fx.new_id()
    old = fx.observation(pid, "8867-4", 130, "/min", when="2025-06-01T10:00:00Z")
    fresh_rr = fx.observation(pid, "9279-1", 16, "/min", when=fx.recent(300))  # 5 h ago
    body = _triage(pid, [old, fresh_rr], [fx.condition(pid, "29857009")])
    inputs = _inputs(client, body)
    assert inputs["heartRate"]["state"] == "stale"
    assert _details(inputs["heartRate"]) == [
        "No heart rate in the last 6 h: the latest was taken 2025-06-01"
    ]
    assert inputs["heartRate"]["reasons"][0]["source"] == f"Observation/{old['id']}"
    assert inputs["respRate"]["state"] == "complete"
    # the stale reading is no fact: chest pain with 130/min would have been Immediate
    record = client.get(f"/runs/{inputs['heartRate']['runId']}").json()
    assert "heartRate" not in str(record["proof"])


def test_a_newer_stale_reading_never_hides_behind_an_older_fresh_one(client: TestClient) -> None:
    pid = fx.new_id()
    readings = [
        fx.observation(pid, "8867-4", 80, "/min", when=fx.recent(7 * 60)),  # 7 h ago: stale
        fx.observation(pid, "8867-4", 155, "/min", when=fx.recent(10)),
    ]
    inputs = _inputs(client, _triage(pid, readings))
    assert inputs["heartRate"]["state"] == "complete"


def test_an_egfr_older_than_ninety_days_is_stale_for_medication_safety(
    client: TestClient,
) -> None:
    pid = fx.new_id()
    old = fx.observation(
        pid, "33914-3", 25, "mL/min/{1.73_m2}", category="laboratory", when="2026-01-15"
    )
    body = fx.hook_request(
        "order-sign",
        {
            "patientId": pid,
            "draftOrders": {
                "resourceType": "Bundle",
                "type": "collection",
                "entry": [{"resource": fx.draft_order(pid, "5640")}],
            },
        },
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid),
            "allergies": fx.searchset([]),
            "labs": fx.searchset([old]),
        },
    )
    inputs = _inputs(client, body, MED_SAFETY)
    assert inputs["egfr"]["state"] == "stale"
    assert _details(inputs["egfr"]) == [
        "No eGFR in the last 90 days: the latest was taken 2026-01-15"
    ]


def test_a_null_vitals_key_makes_every_vital_an_absent_input(client: TestClient) -> None:
    pid = fx.new_id()
    inputs = _inputs(client, _triage(pid, None, [fx.condition(pid, "29857009")]))
    for name in ("heartRate", "respRate", "spo2", "systolicBP", "temperature"):
        assert inputs[name]["state"] == "absent", name
        assert "'vitals'" in _details(inputs[name])[0], inputs[name]
    assert _details(inputs["heartRate"]) == [
        "No heart rate: no data for 'vitals' (not provided or null)"
    ]
    assert inputs["hasSymptom"]["state"] == "complete"
    assert inputs["age"]["state"] == "complete"


def test_an_answered_empty_search_is_none_for_a_record_list_and_absent_for_a_measurement(
    client: TestClient,
) -> None:
    pid = fx.new_id()
    inputs = _inputs(client, _triage(pid, [], []))
    # hasSymptom is declared horis:absentMeans horis:None: no recorded condition means none
    assert inputs["hasSymptom"]["state"] == "complete"
    # a heart rate is a measurement: an answered search without one leaves it unknown
    assert inputs["heartRate"]["state"] == "absent"
    assert _details(inputs["heartRate"]) == [
        "No heart rate reading in the data the service received"
    ]


def test_a_record_list_whose_key_is_null_is_absent_not_none(client: TestClient) -> None:
    pid = fx.new_id()
    inputs = _inputs(client, _triage(pid, [fx.observation(pid, "8867-4", 80, "/min")], None))
    assert inputs["hasSymptom"]["state"] == "absent"
    assert _details(inputs["hasSymptom"]) == [
        "No has symptom: no data for 'conditions' (not provided or null)"
    ]


def test_a_reading_about_another_patient_is_refused(client: TestClient) -> None:
    pid, other = fx.new_id(), fx.new_id()
    stray = fx.observation(other, "8867-4", 160, "/min")
    inputs = _inputs(client, _triage(pid, [fx.observation(pid, "9279-1", 16, "/min"), stray]))
    assert inputs["heartRate"]["state"] == "refused"
    assert _details(inputs["heartRate"]) == [
        f"Heart rate reading not used: it is about Patient/{other}, not this patient"
    ]
    assert inputs["respRate"]["state"] == "complete"


def test_a_value_the_gate_refuses_is_a_refused_input(client: TestClient) -> None:
    pid = fx.new_id()
    inputs = _inputs(client, _triage(pid, [fx.observation(pid, "8867-4", 400, "/min")]))
    assert inputs["heartRate"]["state"] == "refused"
    (detail,) = _details(inputs["heartRate"])
    assert detail.startswith("Heart rate reading not used:") and "maximum 300" in detail


def test_only_cancelled_readings_are_refused_with_their_status(client: TestClient) -> None:
    pid = fx.new_id()
    cancelled = fx.observation(pid, "8867-4", 130, "/min") | {"status": "cancelled"}
    inputs = _inputs(client, _triage(pid, [cancelled]))
    assert inputs["heartRate"]["state"] == "refused"
    assert _details(inputs["heartRate"]) == [
        "Heart rate reading not used: its status is 'cancelled', not a result"
    ]


def test_draft_orders_and_an_answered_allergy_search_are_complete_record_lists(
    client: TestClient,
) -> None:
    pid = fx.new_id()
    body = fx.hook_request(
        "order-sign",
        {
            "patientId": pid,
            "draftOrders": {
                "resourceType": "Bundle",
                "type": "collection",
                "entry": [{"resource": fx.draft_order(pid, "5640")}],
            },
        },
        fhir_server=None,
        prefetch={"patient": fx.patient(pid), "allergies": fx.searchset([]), "labs": None},
    )
    inputs = _inputs(client, body, MED_SAFETY)
    assert inputs["hasAllergy"]["state"] == "complete"
    assert inputs["hasDraftOrder"]["state"] == "complete"
    assert inputs["egfr"]["state"] == "absent"
    assert _details(inputs["egfr"]) == ["No eGFR: no data for 'labs' (not provided or null)"]


def test_a_prefetched_searchset_with_a_next_page_not_sent_is_truncated(client: TestClient) -> None:
    pid = fx.new_id()
    body = _triage(pid, [fx.observation(pid, "8867-4", 80, "/min")])
    body["prefetch"]["vitals"]["link"] = [
        {"relation": "next", "url": "https://ehr.example/fhir/Observation?page=2"}
    ]
    inputs = _inputs(client, body)
    assert inputs["heartRate"]["state"] == "truncated"
    assert _details(inputs["heartRate"]) == [
        "The 'vitals' search was cut off (the client sent its first page only): more heart "
        "rate data may exist than was read"
    ]
    assert inputs["hasSymptom"]["state"] == "complete"


def test_a_prefetched_searchset_short_of_its_total_is_truncated(client: TestClient) -> None:
    pid = fx.new_id()
    body = _triage(pid, [fx.observation(pid, "8867-4", 80, "/min")])
    body["prefetch"]["vitals"]["total"] = 12  # the EHR counted 12 and sent one
    inputs = _inputs(client, body)
    assert inputs["heartRate"]["state"] == "truncated"
    assert "the search counted 12 matches and sent 1" in _details(inputs["heartRate"])[0]


@pytest.mark.fhirserver
def test_a_vitals_search_paging_past_its_budget_is_truncated_and_the_page_beyond_is_not_read(
    make_app_client: OpenClient, fhir_server: FhirServer, tmp_path: Path
) -> None:
    # the bundled triage deployment, its vitals search paged 5 readings at a time
    text = TRIAGE_TTL.read_text()
    assert text.count('&category=vital-signs"') == 1
    paged = tmp_path / "triage.ttl"
    paged.write_text(text.replace('&category=vital-signs"', '&category=vital-signs&_count=5"'))
    pid, eid = fx.new_id(), fx.new_id()
    fhir_server.create(fx.patient(pid))
    for _ in range(10):  # pages 1 and 2: a normal heart rate
        fhir_server.create(fx.observation(pid, "8867-4", 80, "/min"))
    beyond = fhir_server.create(fx.observation(pid, "8867-4", 160, "/min"))  # page 3
    body = fx.hook_request(
        "encounter-start",
        {"patientId": pid, "encounterId": eid},
        fhir_server=fhir_server.base_url,
        prefetch={"encounter": fx.encounter(eid, pid), "conditions": fx.searchset([])},
    )
    mark = fhir_server.mark()
    with make_app_client(
        ontology_paths=[paged], max_fhir_pages=2, reconcile_interval_seconds=0
    ) as client:
        inputs = _inputs(client, body)
        record = client.get(f"/runs/{inputs['heartRate']['runId']}").json()

    assert inputs["heartRate"]["state"] == "truncated"
    assert _details(inputs["heartRate"]) == [
        "The 'vitals' search was cut off (it has more than 2 pages): more heart rate data may "
        "exist than was read"
    ]
    assert inputs["age"]["state"] == "complete"
    searches = [
        r for r in fhir_server.requests(mark) if r["url"].split("?")[0].endswith("/Observation")
    ]
    assert len(searches) == 2  # pages 1 and 2; the page holding the 160/min reading never asked for
    assert beyond["id"] not in {s["id"] for s in record["sources"]}
