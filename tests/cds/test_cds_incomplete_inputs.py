"""Incomplete data is never a confident decision: five ways triage once failed open, over HTTP.

Each call sends everything else a triage needs (a complete set of unremarkable vital signs, an
answered conditions search), and one input that is missing, refused, stale or cut off. None may
answer a confident acuity: each ends at the escalation for incomplete data, with a warning card
that names the input and why in a clinician's words, and nothing written to the Encounter. The
fifth — a deployment with a silent mistake in it — is refused before it can answer at all.
Real HTTP through the ASGI app; the Node FHIR server and a scripted loopback server for reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.ontology import default_ontology_paths
from tests.cds import clinical as fx
from tests.cds.card_markdown import check_card, check_summary, decision_record_text
from tests.support.fhir_server import FhirServer
from tests.support.rogue_http import Answer, rogue_server

OpenClient = Callable[..., AbstractContextManager[TestClient]]
TRIAGE = "/cds-services/horismos-triage"
HR, SPO2 = "8867-4", "59408-5"
SUMMARY = "Triage not decided: vital signs or conditions incomplete"


@pytest.fixture
def client(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client(public_base_url="https://cds.example.test") as c:
        yield c


def _call(
    fhir_server: FhirServer,
    vitals: list[dict[str, Any]] | None,
    pid: str,
    *,
    conditions: tuple[str, ...] = (),
) -> tuple[dict[str, Any], str]:
    """A triage call with everything prefetched (``vitals`` None: the key is null), against the
    FHIR server for writes; returns the call and the Encounter's id."""
    eid = fx.new_id()
    patient = fhir_server.create(fx.patient(pid))
    encounter = fhir_server.create(fx.encounter(eid, pid))
    body = fx.hook_request(
        "encounter-start",
        {"patientId": pid, "encounterId": eid},
        fhir_server=fhir_server.base_url,
        prefetch={
            "patient": patient,
            "encounter": encounter,
            "vitals": None if vitals is None else fx.searchset(vitals),
            "conditions": fx.searchset([fx.condition(pid, c) for c in conditions]),
        },
    )
    return body, eid


def _prefetched(*, with_encounter: bool = True) -> dict[str, Any]:
    """A triage call with everything prefetched and unremarkable (no FHIR server): the
    encounter key null unless ``with_encounter``."""
    pid, eid = fx.new_id(), fx.new_id()
    return fx.hook_request(
        "encounter-start",
        {"patientId": pid, "encounterId": eid},
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid),
            "encounter": fx.encounter(eid, pid) if with_encounter else None,
            "vitals": fx.searchset(fx.vital_signs(pid)),
            "conditions": fx.searchset([]),
        },
    )


def _undecided(resp: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run and its one card, asserting nothing was decided and the card warns."""
    assert resp.status_code == 200, resp.text
    answer = resp.json()
    run = answer["extension"]["dev.horismos.run"]
    assert "decision" not in run, run
    assert run["terminal"] == "EscalateIncomplete"
    [card] = answer["cards"]
    assert card["indicator"] == "warning" and card["summary"] == SUMMARY
    check_card(card["detail"])  # within the card budget: three inputs at most, the rest on record
    check_summary(card["summary"])
    return run, card


def _nothing_written(fhir_server: FhirServer, eid: str) -> None:
    assert "priority" not in fhir_server.read("Encounter", eid)


@pytest.mark.fhirserver
def test_an_spo2_whose_unit_is_display_only_is_refused_and_said(
    client: TestClient, fhir_server: FhirServer
) -> None:
    """85 % would be Immediate; its unit is display text only ("percent", no UCUM code), so it
    is not read — and triage does not fall to the lower acuity the other readings give."""
    pid = fx.new_id()
    spo2 = fx.observation(pid, SPO2, 85, "%")
    spo2["valueQuantity"] = {"value": 85, "unit": "percent"}
    body, eid = _call(fhir_server, [spo2, *fx.vital_signs(pid, skip={SPO2})], pid)
    run, card = _undecided(client.post(TRIAGE, json=body))
    assert (
        "Oxygen saturation reading not used: unit 'percent' is not a recognized unit "
        "(the reading was 85 percent)" in card["detail"]
    )
    assert "the rules give Non-urgent, which is not a decision" in card["detail"]
    record = decision_record_text(client, card)  # what it could change: on the record
    assert "could change it: SpO2 below 90 % (Immediate)" in record
    assert "Non-urgent. This is not a decision." in record
    _nothing_written(fhir_server, eid)
    assert run["undecided"] == {
        "property": "acuity",
        "inputs": [{"input": "spo2", "state": "refused"}],
    }
    stored = client.get(f"/runs/{run['runId']}").json()
    [spo2_input] = [i for i in stored["inputs"] if i["property"].endswith("#spo2")]
    assert spo2_input["state"] == "refused"
    assert stored["undecided"]["held"] == "NonUrgent" and "decision" not in stored
    page = client.get(f"/runs/{run['runId']}", headers={"accept": "text/html"}).text
    assert "Not decided — data it depends on is missing or was not used (oxygen saturation)" in page
    assert "the rules give acuity: Non-urgent. This is not a decision." in page


@pytest.mark.fhirserver
def test_a_display_only_unit_that_is_the_ucum_unit_itself_is_read(
    client: TestClient, fhir_server: FhirServer
) -> None:
    """Display text that is literally the unit the property wants ("%") is unambiguous: the
    reading is used, and 85 % is Immediate, decided on complete data."""
    pid = fx.new_id()
    spo2 = fx.observation(pid, SPO2, 85, "%")
    spo2["valueQuantity"] = {"value": 85, "unit": "%"}
    body, _ = _call(fhir_server, [spo2, *fx.vital_signs(pid, skip={SPO2})], pid)
    answer = client.post(TRIAGE, json=body).json()
    assert answer["extension"]["dev.horismos.run"]["decision"]["value"] == "Immediate"


@pytest.mark.fhirserver
def test_a_heart_rate_taken_last_year_is_stale_not_a_fact(
    client: TestClient, fhir_server: FhirServer
) -> None:
    pid = fx.new_id()
    old = fx.observation(pid, HR, 160, "/min", when="2025-06-01T10:00:00+00:00")
    body, eid = _call(fhir_server, [old, *fx.vital_signs(pid, skip={HR})], pid)
    _, card = _undecided(client.post(TRIAGE, json=body))
    assert "No heart rate in the last 6 h: the latest was taken 2025-06-01" in card["detail"]
    assert "Immediate" not in card["summary"] and "160" not in card["detail"]
    _nothing_written(fhir_server, eid)


@pytest.mark.fhirserver
def test_null_vitals_with_chest_pain_is_not_a_confident_urgent(
    client: TestClient, fhir_server: FhirServer
) -> None:
    """Chest pain alone is Urgent; with a heart rate above 120 it is Immediate, and the EHR sent
    no vital signs at all."""
    pid = fx.new_id()
    body, eid = _call(fhir_server, None, pid, conditions=("29857009",))
    _, card = _undecided(client.post(TRIAGE, json=body))
    assert "No heart rate: no data for 'vitals' (not provided or null)" in card["detail"]
    assert "the rules give Urgent, which is not a decision" in card["detail"]
    record = decision_record_text(client, card)
    assert "Chest pain with heart rate above 120 /min (Immediate)" in record
    assert "Urgent. This is not a decision." in record
    _nothing_written(fhir_server, eid)


def test_a_missing_encounter_leaves_the_complaint_unread_and_triage_undecided(
    client: TestClient,
) -> None:
    """The complaint is read from the Encounter's reason text; with the encounter key null it
    could not be read, so a symptom it would have named is unknown — not "no symptom"."""
    run, card = _undecided(client.post(TRIAGE, json=_prefetched(with_encounter=False)))
    assert "Has symptom not read from the free text" in card["detail"]
    assert (
        "Has symptom not read from the free text: no data for 'encounter', which carries the "
        "Encounter's text" in decision_record_text(client, card)
    )
    assert run["undecided"]["inputs"] == [{"input": "hasSymptom", "state": "absent"}]


def test_a_vitals_search_cut_off_after_ten_pages_is_not_read_as_whole(
    make_app_client: OpenClient,
) -> None:
    """The reading of 160 /min is on page 11: past the page budget. What was read (normal
    readings) is not the whole answer, so it decides nothing."""
    pid, eid = fx.new_id(), fx.new_id()
    with rogue_server() as fhir, make_app_client() as client:

        def page(path: str) -> Answer:
            n = int(path.split("page=")[1]) if "page=" in path else 1
            readings = fx.vital_signs(pid) if n <= 10 else [fx.observation(pid, HR, 160, "/min")]
            bundle = fx.searchset(readings)
            bundle["link"] = [
                {"relation": "next", "url": f"{fhir.base}/fhir/Observation?page={n + 1}"}
            ]
            return Answer.json(bundle)

        fhir.on("/fhir/Observation", page)
        body = fx.hook_request(
            "encounter-start",
            {"patientId": pid, "encounterId": eid},
            fhir_server=fhir.base + "/fhir",
            prefetch={
                "patient": fx.patient(pid),
                "encounter": fx.encounter(eid, pid),
                "conditions": fx.searchset([]),
            },
        )
        run, card = _undecided(client.post(TRIAGE, json=body))
        assert "The 'vitals' search was cut off (it has more than 10 pages)" in card["detail"]
        assert (  # every input it cut off, on the decision record
            "The 'vitals' search was cut off (it has more than 10 pages): more heart rate data "
            "may exist than was read"
        ) in decision_record_text(client, card)
        stored = client.get(f"/runs/{run['runId']}").json()
    assert [e["step"] for e in stored["trace"]] == ["Intake", "Assess", "EscalateIncomplete"]
    assert not any(
        call.get("tool") == "ehr.assign_queue" for e in stored["trace"] for call in e["calls"]
    )


@pytest.mark.parametrize(
    ("old", "new", "finding"),
    [
        ('horis:unit "mm[Hg]"', 'horis:unit "mmHg"', "mmHg"),
        ('horis:fhirPath "valueQuantity"', 'horis:fhirPath "valueQuantiy"', "valueQuantiy"),
        ('"Patient/{{context.patientId}}"', '"Patient/{{context.patient}}"', "context.patient"),
        (
            '"reference": "Patient/{{context.patientId}}"',
            '"reference": "Patient/{{context.patient}}"',
            "context.patient",
        ),
        ('horis:hook "encounter-start"', 'horis:hook "encounter-strat"', "encounter-strat"),
    ],
)
def test_a_deployment_with_a_silent_mistake_is_refused_not_served_mute(
    old: str, new: str, finding: str, make_app_client: OpenClient, tmp_path: Path
) -> None:
    """Once each of these loaded, verified and answered 200 with no card, every call. Now the
    deployment is refused: its service is not offered, a call to it is answered 503 naming the
    deployment, and /readyz names the mistake."""
    [triage] = [p for p in default_ontology_paths() if p.name == "triage.ttl"]
    text = triage.read_text(encoding="utf-8")
    assert old in text
    mutant = tmp_path / "triage.ttl"
    mutant.write_text(text.replace(old, new, 1), encoding="utf-8")
    body = _prefetched()
    with make_app_client(ontology_paths=[mutant]) as client:
        services = {s["id"] for s in client.get("/cds-services").json()["services"]}
        answer = client.post(TRIAGE, json=body)
        ready = client.get("/readyz").json()
    assert "horismos-triage" not in services
    assert answer.status_code in (404, 503), answer.text
    assert answer.status_code < 500 or "triage" in answer.text
    [deployment] = [d for d in ready["deployments"] if d["id"] == "triage"]
    assert deployment["status"] != "serving"
    assert finding in " ".join(str(p) for p in deployment["problems"])


def _order_sign(pid: str, rx: str, allergies: list[dict[str, Any]]) -> dict[str, Any]:
    """Amoxicillin or another draft, with normal eGFR and potassium and these allergies."""
    labs = [
        fx.observation(pid, "33914-3", 80, "mL/min/{1.73_m2}", category="laboratory"),
        fx.observation(pid, "2823-3", 4.2, "mmol/L", category="laboratory"),
    ]
    return fx.order_sign(
        pid,
        [fx.draft_order(pid, rx)],
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid),
            "allergies": fx.searchset(allergies),
            "labs": fx.searchset(labs),
        },
    )


def test_an_allergy_recorded_as_text_only_is_not_read_as_no_allergy(client: TestClient) -> None:
    """'PCN - anaphylaxis' with no code: the service cannot tell what it is, so amoxicillin is
    not called safe — the card names the record and its text."""
    pid = fx.new_id()
    text_only = fx.allergy(pid, "91936005")
    text_only["code"] = {"text": "PCN - anaphylaxis"}
    answer = client.post(
        "/cds-services/horismos-med-safety", json=_order_sign(pid, "723", [text_only])
    ).json()
    run = answer["extension"]["dev.horismos.run"]
    assert "decision" not in run and run["terminal"] == "NotDecided"
    [card] = answer["cards"]
    assert card["indicator"] == "warning"
    assert (
        "Has allergy: 'PCN - anaphylaxis' (allergy intolerance)" in card["detail"]
        and "could not be read: it has no code, only its text" in card["detail"]
    )
    record = decision_record_text(client, card)
    assert "Penicillin with a penicillin allergy (Contraindicated)" in record


def test_a_coded_allergy_the_service_does_not_check_for_changes_nothing(
    client: TestClient,
) -> None:
    """An allergy with a code the deployment does not list (peanut) is not one it checks:
    amoxicillin is decided as ever."""
    pid = fx.new_id()
    peanut = fx.allergy(pid, "91935009")
    answer = client.post(
        "/cds-services/horismos-med-safety", json=_order_sign(pid, "723", [peanut])
    ).json()
    assert answer["extension"]["dev.horismos.run"]["decision"]["value"] == "Safe"
    assert answer["cards"] == []
