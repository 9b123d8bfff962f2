"""Acceptance: the triage escalation reaches a person through the EHR.

A triage hook that cannot complete ends at an escalation (EscalateIncomplete when vital signs are
missing, EscalateToNurse when the complaint could not be read), which creates one FHIR Communication
in the real Node FHIR server: addressed to the encounter's participants, with the reason in the
deployment's words and the link to the decision record. Exactly one, whether the hook call is
sent again, the answer to the create is lost once (the retry finds it) or every time
(reconciliation finds it by its identifier). Without the write scope, or without a FHIR server,
nothing is created and the card says nobody was notified.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from adapters.fhir.reconcile import reconcile_pending
from app.main import create_app
from app.settings import Settings
from app.store.effects import effect_reports
from tests.cds import clinical
from tests.commit.dropping_proxy import dropping_proxy
from tests.support.fhir_server import FhirServer
from tests.support.live_server import live_server

pytestmark = pytest.mark.fhirserver

WRITE_SCOPE = "user/*.read user/Encounter.write user/Communication.write"
QUEUE_ONLY_SCOPE = "user/*.read user/Encounter.write"
REASON = "Triage needs a nurse's assessment"
#: the card of a triage that did not decide because vital signs were missing
INCOMPLETE = "Triage not decided: vital signs or conditions incomplete"
ASK = (
    "Automatic triage could not complete for this patient. Please assess the patient in person "
    "and set the triage priority."
)
LINK_SECRET = "a-link-secret-of-at-least-32-characters!"


@pytest.fixture
def client(pg_url: str, pg_engine: Engine) -> Iterator[TestClient]:
    settings = Settings(database_url=pg_url, reconcile_interval_seconds=0)
    with TestClient(create_app(settings)) as c:
        yield c


def _encounter(fhir_server: FhirServer, *participants: str) -> tuple[str, dict[str, Any]]:
    """A patient and an ED encounter with these participants, stored on the FHIR server."""
    pid = fhir_server.new_id()
    fhir_server.create(clinical.patient(pid))
    encounter = clinical.encounter(fhir_server.new_id(), pid)
    encounter["participant"] = [{"individual": {"reference": p}} for p in participants]
    if not participants:
        del encounter["participant"]
    return pid, fhir_server.create(encounter)


def _hook(
    server: str | None,
    pid: str,
    encounter: dict[str, Any],
    *,
    scope: str = WRITE_SCOPE,
    vitals: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """An encounter-start call with everything prefetched; no vitals and no conditions by
    default, so the rules cannot decide an acuity and the run escalates."""
    return clinical.hook_request(
        "encounter-start",
        {"patientId": pid, "encounterId": encounter["id"]},
        fhir_server=server,
        scope=scope,
        prefetch={
            "patient": clinical.patient(pid),
            "encounter": encounter,
            "vitals": clinical.searchset(vitals or []),
            "conditions": clinical.searchset([]),
        },
    )


def _communications(fhir_server: FhirServer, encounter: dict[str, Any]) -> list[dict[str, Any]]:
    """Every Communication the FHIR server holds about the encounter."""
    response = httpx.get(
        f"{fhir_server.base_url}/Communication",
        params={"encounter": f"Encounter/{encounter['id']}"},
        headers={"accept": "application/fhir+json"},
    )
    response.raise_for_status()
    return [e["resource"] for e in response.json().get("entry", [])]


def _answer(response: httpx.Response) -> tuple[str, dict[str, Any], dict[str, Any]]:
    assert response.status_code == 200, response.text
    body = response.json()
    run = body["extension"]["dev.horismos.run"]
    [card] = body["cards"]
    return run["runId"], run, card


def _posts(fhir_server: FhirServer, mark: int) -> list[str]:
    return [r["url"] for r in fhir_server.requests(since=mark) if r["method"] == "POST"]


def test_an_escalation_creates_one_communication_to_the_care_team_over_http(
    pg_url: str, pg_engine: Engine, fhir_server: FhirServer, tmp_path: Path
) -> None:
    """The service as a process: the nurse gets one message that links to the decision record,
    and the EHR sending the same hook call again creates nothing more."""
    pid, encounter = _encounter(fhir_server, "Practitioner/nurse-1", "Practitioner/dr-2")
    body = _hook(fhir_server.base_url, pid, encounter)
    env = {
        "HORISMOS_DATABASE_URL": pg_url,
        "HORISMOS_RECONCILE_INTERVAL_SECONDS": "0",
        "HORISMOS_LINK_SECRET": LINK_SECRET,
    }
    mark = fhir_server.mark()
    with live_server(env, tmp_path / "server.log") as server, httpx.Client(timeout=30) as http:
        url = f"{server.base}/cds-services/horismos-triage"
        first = http.post(url, json=body)
        again = http.post(url, json=body)
        run_id, run, card = _answer(first)
        [message] = _communications(fhir_server, encounter)
        [link] = [
            p["contentAttachment"]["url"] for p in message["payload"] if "contentAttachment" in p
        ]
        record = http.get(link, headers={"accept": "application/json"})

    assert (run["terminal"], run.get("decision")) == ("EscalateIncomplete", None)
    assert again.json() == first.json()
    assert _posts(fhir_server, mark) == ["/fhir/Communication"]  # once, for both calls
    assert message["status"] == "completed"
    assert message["subject"] == {"reference": f"Patient/{pid}"}
    assert message["encounter"] == {"reference": f"Encounter/{encounter['id']}"}
    assert message["recipient"] == [
        {"reference": "Practitioner/nurse-1"},
        {"reference": "Practitioner/dr-2"},
    ]
    assert message["reasonCode"] == [{"text": REASON}]
    assert [p.get("contentString") for p in message["payload"]] == [ASK, None]
    # the link is this run's signed decision record, which a browser opens without a JWT
    assert link.startswith(f"{server.base}/runs/{run_id}?exp=")
    assert record.status_code == 200, record.text
    assert record.json()["terminal"] == "EscalateIncomplete"
    [effect] = effect_reports(pg_engine, run_id)
    assert effect["created"] == f"Communication/{message['id']}"
    assert [i["value"] for i in message["identifier"]] == [effect["identifier"].split("|")[1]]
    assert card["summary"] == INCOMPLETE
    assert (
        f"Sent through the EHR: Communication/{message['id']} was created, addressed to "
        "Practitioner/nurse-1, Practitioner/dr-2."
    ) in card["detail"]


def test_the_message_carries_the_acuity_the_rules_gave_when_triage_could_not_complete(
    client: TestClient, fhir_server: FhirServer
) -> None:
    """Free text and no Bridge: Intake falls back to the escalation; the structured data still
    gave an acuity, and the nurse reads it."""
    pid, encounter = _encounter(fhir_server, "Practitioner/nurse-1")
    encounter_with_reason = {**encounter, "reasonCode": [{"text": "chest pain"}]}
    vitals = [clinical.observation(pid, "8867-4", 160, "/min")]
    body = _hook(fhir_server.base_url, pid, encounter_with_reason, vitals=vitals)

    _, run, _ = _answer(client.post("/cds-services/horismos-triage", json=body))

    assert run["terminal"] == "EscalateToNurse"
    [message] = _communications(fhir_server, encounter)
    assert [p.get("contentString") for p in message["payload"][:2]] == [
        ASK,
        "From the data they could read, the rules give the acuity Immediate.",
    ]


def test_a_new_hook_instance_is_a_new_decision_with_its_own_message(
    client: TestClient, fhir_server: FhirServer
) -> None:
    """Nothing prefetched: the service reads the Encounter, and its participants, itself."""
    pid, encounter = _encounter(fhir_server, "Practitioner/nurse-1")
    body = _hook(fhir_server.base_url, pid, encounter)
    del body["prefetch"]
    first, _, _ = _answer(client.post("/cds-services/horismos-triage", json=body))
    second, _, _ = _answer(
        client.post(
            "/cds-services/horismos-triage", json={**body, "hookInstance": str(uuid.uuid4())}
        )
    )

    assert first != second
    messages = _communications(fhir_server, encounter)
    links = sorted(
        next(p["contentAttachment"]["url"] for p in m["payload"] if "contentAttachment" in p)
        for m in messages
    )
    assert [link.split("/runs/")[1] for link in links] == sorted([first, second])
    assert [m["recipient"] for m in messages] == [[{"reference": "Practitioner/nurse-1"}]] * 2


def test_a_lost_answer_to_the_create_is_retried_and_finds_the_one_it_made(
    client: TestClient, fhir_server: FhirServer, pg_engine: Engine
) -> None:
    pid, encounter = _encounter(fhir_server, "Practitioner/nurse-1")
    origin = fhir_server.base_url.removesuffix("/fhir")

    with dropping_proxy(origin, drop_first=1) as (proxy, forwarded):
        run_id, _, card = _answer(
            client.post(
                "/cds-services/horismos-triage", json=_hook(proxy + "/fhir", pid, encounter)
            )
        )

    assert forwarded == ["/fhir/Communication", "/fhir/Communication"]  # the retry asked again
    [message] = _communications(fhir_server, encounter)
    [effect] = effect_reports(pg_engine, run_id)
    assert (effect["state"], effect["attempts"]) == ("accepted", 2)
    assert effect["created"] == f"Communication/{message['id']}"
    assert f"Sent through the EHR: Communication/{message['id']} was created" in card["detail"]


def test_a_create_whose_every_answer_is_lost_is_settled_by_reconciliation(
    client: TestClient, fhir_server: FhirServer, pg_engine: Engine
) -> None:
    pid, encounter = _encounter(fhir_server, "Practitioner/nurse-1")
    origin = fhir_server.base_url.removesuffix("/fhir")

    with dropping_proxy(origin) as (proxy, forwarded):
        run_id, _, card = _answer(
            client.post(
                "/cds-services/horismos-triage", json=_hook(proxy + "/fhir", pid, encounter)
            )
        )
        assert forwarded == ["/fhir/Communication", "/fhir/Communication"]
        assert [e["state"] for e in effect_reports(pg_engine, run_id)] == ["unknown"]
        assert (
            "Not confirmed: the EHR did not answer the creation of the Communication; whether "
            "anyone was notified through it will be checked again."
        ) in card["detail"]
        with httpx.Client() as http:
            settled = reconcile_pending(pg_engine, http=http)

    assert [(s.run_id, s.before, s.after) for s in settled] == [(run_id, "unknown", "accepted")]
    [message] = _communications(fhir_server, encounter)
    [effect] = effect_reports(pg_engine, run_id)
    assert effect["created"] == f"Communication/{message['id']}"


def test_without_the_write_scope_nobody_is_notified_and_the_card_says_so(
    client: TestClient, fhir_server: FhirServer
) -> None:
    pid, encounter = _encounter(fhir_server, "Practitioner/nurse-1")
    body = _hook(fhir_server.base_url, pid, encounter, scope=QUEUE_ONLY_SCOPE)
    mark = fhir_server.mark()

    _, run, card = _answer(client.post("/cds-services/horismos-triage", json=body))

    assert run["terminal"] == "EscalateIncomplete"
    assert _posts(fhir_server, mark) == []
    assert _communications(fhir_server, encounter) == []
    assert card["summary"] == INCOMPLETE
    assert (
        "Nobody was notified through the EHR: no Communication was created "
        "(fhirAuthorization.scope does not grant user/Communication.write)."
    ) in card["detail"]


def test_without_a_fhir_server_nobody_is_notified_and_the_card_says_so(
    client: TestClient, fhir_server: FhirServer
) -> None:
    pid, encounter = _encounter(fhir_server, "Practitioner/nurse-1")
    mark = fhir_server.mark()

    _, run, card = _answer(
        client.post("/cds-services/horismos-triage", json=_hook(None, pid, encounter))
    )

    assert run["terminal"] == "EscalateIncomplete"
    assert fhir_server.requests(since=mark) == []
    assert (
        "Nobody was notified through the EHR: no Communication was created "
        "(the request names no FHIR server to write to)."
    ) in card["detail"]
    assert "Not completed" not in card["detail"]


def test_an_encounter_with_no_participant_gets_a_message_addressed_to_no_one_and_says_so(
    client: TestClient, fhir_server: FhirServer
) -> None:
    pid, encounter = _encounter(fhir_server)

    _, _, card = _answer(
        client.post(
            "/cds-services/horismos-triage", json=_hook(fhir_server.base_url, pid, encounter)
        )
    )

    [message] = _communications(fhir_server, encounter)
    assert "recipient" not in message
    assert (
        f"Sent through the EHR: Communication/{message['id']} was created, addressed to no one"
    ) in card["detail"]
