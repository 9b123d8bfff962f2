"""Acceptance: triage hook calls commit Encounter.priority to the real FHIR server.

Real PostgreSQL, the real Node FHIR server, the service over HTTP (TestClient): the Encounter is
updated only against the version the run read, concurrent decisions cannot overwrite each other,
a missing scope sends nothing, and a lost answer is settled by ``horismos reconcile``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.main import create_app
from app.runtime.host import stored_recording
from app.runtime.replay import replay_run
from app.settings import Settings
from app.store.effects import effect_reports
from tests.cds import clinical as fx
from tests.commit.dropping_proxy import dropping_proxy
from tests.support.fhir_server import FhirServer

pytestmark = pytest.mark.fhirserver

PRIORITY = "http://terminology.hl7.org/CodeSystem/v3-ActPriority"
LOINC = "http://loinc.org"
WRITE_SCOPE = "user/*.read user/Encounter.write user/Communication.write"
READ_ONLY_SCOPE = "user/*.read"
CHANGED = "changed since the decision was computed"


@pytest.fixture
def client(pg_url: str, pg_engine: Engine) -> Iterator[TestClient]:
    settings = Settings(database_url=pg_url, reconcile_interval_seconds=0)
    with TestClient(create_app(settings)) as c:
        yield c


def _heart_rate(pid: str, value: float) -> dict[str, Any]:
    return {
        "resourceType": "Observation",
        "id": uuid.uuid4().hex[:16],
        "status": "final",
        "category": [
            {
                "coding": [
                    {
                        "system": "http://terminology.hl7.org/CodeSystem/observation-category",
                        "code": "vital-signs",
                    }
                ]
            }
        ],
        "code": {"coding": [{"system": LOINC, "code": "8867-4"}]},
        "subject": {"reference": f"Patient/{pid}"},
        "effectiveDateTime": fx.recent(),
        "valueQuantity": {
            "value": value,
            "unit": "/min",
            "system": "http://unitsofmeasure.org",
            "code": "/min",
        },
    }


def _bundle(resources: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "resourceType": "Bundle",
        "type": "searchset",
        "entry": [{"resource": r} for r in resources],
    }


def _patient_and_encounter(fhir_server: FhirServer) -> tuple[dict[str, Any], dict[str, Any]]:
    pid = fhir_server.new_id()
    patient = fhir_server.create({"resourceType": "Patient", "id": pid, "birthDate": "1980-01-01"})
    encounter = fhir_server.create(
        {
            "resourceType": "Encounter",
            "id": fhir_server.new_id(),
            "status": "in-progress",
            "class": {"system": "http://terminology.hl7.org/CodeSystem/v3-ActCode", "code": "EMER"},
            "subject": {"reference": f"Patient/{pid}"},
        }
    )
    return patient, encounter


def _hook(
    server: str,
    patient: dict[str, Any],
    encounter: dict[str, Any],
    *,
    scope: str = WRITE_SCOPE,
    prefetch: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "hook": "encounter-start",
        "hookInstance": str(uuid.uuid4()),
        "context": {
            "userId": "Practitioner/example",
            "patientId": patient["id"],
            "encounterId": encounter["id"],
        },
        "fhirServer": server,
        "fhirAuthorization": {
            "access_token": "test-token",
            "token_type": "Bearer",
            "expires_in": 300,
            "scope": scope,
            "subject": "horismos",
        },
    }
    if prefetch is not None:
        body["prefetch"] = prefetch
    return body


def _prefetch(
    patient: dict[str, Any], encounter: dict[str, Any], vitals: list[dict[str, Any]]
) -> dict[str, Any]:
    """The heart rates given, and the other vital signs as unremarkable readings (triage
    decides only on a complete set)."""
    rest = fx.vital_signs(patient["id"], skip={"8867-4"})
    return {
        "patient": patient,
        "encounter": encounter,
        "vitals": _bundle([*vitals, *rest]),
        "conditions": _bundle([]),
    }


def _answer(response: Any) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    assert response.status_code == 200, response.text
    body = response.json()
    run = body["extension"]["dev.horismos.run"]
    return run["runId"], run, body["cards"]


def _codes(resource: dict[str, Any]) -> list[str]:
    return [c["code"] for c in resource.get("priority", {}).get("coding", [])]


def test_triage_patches_the_encounter_priority_against_the_version_it_read(
    client: TestClient, fhir_server: FhirServer, pg_engine: Engine
) -> None:
    patient, encounter = _patient_and_encounter(fhir_server)
    fhir_server.create(_heart_rate(patient["id"], 160))
    read_version = encounter["meta"]["versionId"]
    mark = fhir_server.mark()

    run_id, run, cards = _answer(
        client.post(
            "/cds-services/horismos-triage",
            json=_hook(fhir_server.base_url, patient, encounter),
        )
    )

    assert (run["terminal"], run["decision"]["value"]) == ("Done", "Immediate")
    assert [c["indicator"] for c in cards] == ["critical"]
    history = fhir_server.history("Encounter", encounter["id"])
    assert history[0]["meta"]["versionId"] == read_version
    assert len(history) == 2
    assert _codes(history[-1]) == ["EM"]
    assert history[-1]["priority"]["coding"][0]["system"] == PRIORITY
    # one JSON Patch of the priority, against the version read; no read or PUT of the whole
    writes = [r for r in fhir_server.requests(since=mark) if r["method"] != "GET"]
    assert [(w["method"], w["url"], w["ifMatch"]) for w in writes] == [
        ("PATCH", f"/fhir/Encounter/{encounter['id']}", f'W/"{read_version}"')
    ]
    [effect] = effect_reports(pg_engine, run_id)
    assert (effect["state"], effect["expectedVersion"], effect["newVersion"]) == (
        "accepted",
        read_version,
        history[-1]["meta"]["versionId"],
    )
    # the run's record as JSON carries the write with its state
    [recorded] = client.get(f"/runs/{run_id}").json()["effects"]
    assert (recorded["effectId"], recorded["state"], recorded["newVersion"]) == (
        effect["effectId"],
        "accepted",
        history[-1]["meta"]["versionId"],
    )
    assert (recorded["target"], recorded["element"]) == (effect["target"], "priority")


def test_a_patch_changes_only_the_priority_even_from_a_subsetted_prefetch(
    client: TestClient, fhir_server: FhirServer, pg_engine: Engine
) -> None:
    """The EHR prefetched a summary of the Encounter; the record holds more. Read back after the
    hook: the priority is set and every other element is as it was."""
    patient, _ = _patient_and_encounter(fhir_server)
    full = fhir_server.create(
        {
            "resourceType": "Encounter",
            "id": fhir_server.new_id(),
            "status": "in-progress",
            "class": {"system": "http://terminology.hl7.org/CodeSystem/v3-ActCode", "code": "EMER"},
            "subject": {"reference": f"Patient/{patient['id']}"},
            "participant": [{"individual": {"reference": "Practitioner/nurse-1"}}],
            "period": {"start": "2026-01-01T09:55:00Z"},
            "serviceProvider": {"reference": "Organization/ed"},
            "location": [{"location": {"reference": "Location/bay-4"}}],
        }
    )
    summary = {k: full[k] for k in ("resourceType", "id", "meta", "status", "class", "subject")}
    prefetch = _prefetch(patient, summary, [_heart_rate(patient["id"], 160)])

    _, run, _ = _answer(
        client.post(
            "/cds-services/horismos-triage",
            json=_hook(fhir_server.base_url, patient, full, prefetch=prefetch),
        )
    )

    assert run["decision"]["value"] == "Immediate"
    current = fhir_server.read("Encounter", full["id"])
    assert _codes(current) == ["EM"]
    assert current["meta"]["versionId"] != full["meta"]["versionId"]
    assert {k: v for k, v in current.items() if k not in ("priority", "meta")} == {
        k: v for k, v in full.items() if k != "meta"
    }


Race = tuple[dict[str, tuple[str, dict[str, Any], list[dict[str, Any]]]], str, str]


def _race(client: TestClient, fhir_server: FhirServer, pg_engine: Engine) -> Race:
    """Two hook calls that read the same Encounter version and decide different priorities,
    sent at the same moment; returns their answers, the winner and the loser."""
    patient, encounter = _patient_and_encounter(fhir_server)
    calls = {
        "Immediate": _hook(
            fhir_server.base_url,
            patient,
            encounter,
            prefetch=_prefetch(patient, encounter, [_heart_rate(patient["id"], 160)]),
        ),
        "Urgent": _hook(
            fhir_server.base_url,
            patient,
            encounter,
            prefetch=_prefetch(patient, encounter, [_heart_rate(patient["id"], 110)]),
        ),
    }
    answers: dict[str, Any] = {}
    start = threading.Barrier(len(calls))

    def call(acuity: str) -> None:
        start.wait()
        answers[acuity] = client.post("/cds-services/horismos-triage", json=calls[acuity])

    threads = [threading.Thread(target=call, args=(a,)) for a in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    outcomes = {acuity: _answer(answers[acuity]) for acuity in calls}
    states = {
        acuity: sorted((e["operation"], e["state"]) for e in effect_reports(pg_engine, run_id))
        for acuity, (run_id, _, _) in outcomes.items()
    }
    # the loser's write was not made; it escalated, and the nurse was sent a message instead
    assert sorted(states.values()) == [
        [("create", "accepted"), ("patch", "conflicted")],
        [("patch", "accepted")],
    ]
    [winner] = [a for a, s in states.items() if s == [("patch", "accepted")]]
    [loser] = [a for a in states if a != winner]
    history = fhir_server.history("Encounter", encounter["id"])
    assert len(history) == 2
    assert _codes(history[-1]) == [{"Immediate": "EM", "Urgent": "UR"}[winner]]
    return outcomes, winner, loser


def test_two_concurrent_decisions_for_one_encounter_commit_exactly_once(
    client: TestClient, fhir_server: FhirServer, pg_engine: Engine
) -> None:
    outcomes, winner, loser = _race(client, fhir_server, pg_engine)

    _, won, won_cards = outcomes[winner]
    assert won["terminal"] == "Done"
    assert [c["summary"] for c in won_cards] == [f"Triage acuity: {winner}"]
    _, lost, lost_cards = outcomes[loser]
    assert lost["terminal"] != "Done"
    assert lost_cards
    assert all(c["summary"] != f"Triage acuity: {loser}" for c in lost_cards)


def test_the_conflicted_decisions_card_says_the_record_changed(
    client: TestClient, fhir_server: FhirServer, pg_engine: Engine
) -> None:
    outcomes, _, loser = _race(client, fhir_server, pg_engine)

    lost_run, _, lost_cards = outcomes[loser]
    assert any(CHANGED in c.get("detail", "") for c in lost_cards)
    effects = client.get(f"/runs/{lost_run}").json()["effects"]
    # its queue write was refused by the record's change; it escalated, and that message went
    assert sorted((e["operation"], e["state"]) for e in effects) == [
        ("create", "accepted"),
        ("patch", "conflicted"),
    ]


def test_twins_of_one_hook_call_that_writes_send_one_write_and_answer_alike(
    client: TestClient, fhir_server: FhirServer, pg_engine: Engine
) -> None:
    """A run claims its hookInstance before its write leaves: the twin finds the claim, sends
    nothing and answers with the stored response."""
    patient, encounter = _patient_and_encounter(fhir_server)
    body = _hook(
        fhir_server.base_url,
        patient,
        encounter,
        prefetch=_prefetch(patient, encounter, [_heart_rate(patient["id"], 160)]),
    )
    mark = fhir_server.mark()
    answers: list[Any] = []
    start = threading.Barrier(2)

    def call() -> None:
        start.wait()
        answers.append(client.post("/cds-services/horismos-triage", json=body))

    threads = [threading.Thread(target=call) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    (run_id, run, _), (twin_id, _, _) = (_answer(a) for a in answers)
    assert answers[0].json() == answers[1].json()
    assert run_id == twin_id and run["decision"]["value"] == "Immediate"
    writes = [r for r in fhir_server.requests(since=mark) if r["method"] != "GET"]
    assert [w["method"] for w in writes] == ["PATCH"]
    assert len(fhir_server.history("Encounter", encounter["id"])) == 2
    assert [e["state"] for e in effect_reports(pg_engine, run_id)] == ["accepted"]


def test_without_a_write_scope_nothing_reaches_the_fhir_server_and_the_decision_stands(
    client: TestClient, fhir_server: FhirServer, pg_engine: Engine
) -> None:
    patient, encounter = _patient_and_encounter(fhir_server)
    prefetch = _prefetch(patient, encounter, [_heart_rate(patient["id"], 160)])
    mark = fhir_server.mark()

    run_id, run, cards = _answer(
        client.post(
            "/cds-services/horismos-triage",
            json=_hook(
                fhir_server.base_url, patient, encounter, scope=READ_ONLY_SCOPE, prefetch=prefetch
            ),
        )
    )

    assert fhir_server.requests(since=mark) == []
    assert len(fhir_server.history("Encounter", encounter["id"])) == 1
    [effect] = effect_reports(pg_engine, run_id)
    assert effect["state"] == "refused"
    assert effect["attempts"] == 0
    # A read-only grant is the common CDS Hooks case: the decision was computed, so the run
    # finishes normally and its card says the write did not happen, and why.
    assert (run["terminal"], run["decision"]["value"]) == ("Done", "Immediate")
    [card] = cards
    assert (card["summary"], card["indicator"]) == ("Triage acuity: Immediate", "critical")
    assert (
        f"The decision was not written to the EHR. Encounter.priority (Encounter/{encounter['id']})"
        " was not written: fhirAuthorization.scope does not grant user/Encounter.write."
    ) in card["detail"]


def test_a_refused_write_is_traced_as_refused_and_replays_as_refused(
    client: TestClient, fhir_server: FhirServer, pg_engine: Engine
) -> None:
    patient, encounter = _patient_and_encounter(fhir_server)
    prefetch = _prefetch(patient, encounter, [_heart_rate(patient["id"], 160)])
    run_id, _, _ = _answer(
        client.post(
            "/cds-services/horismos-triage",
            json=_hook(
                fhir_server.base_url, patient, encounter, scope=READ_ONLY_SCOPE, prefetch=prefetch
            ),
        )
    )
    why = "Encounter.priority was not written: fhirAuthorization.scope does not grant "
    why += "user/Encounter.write"

    stored = client.get(f"/runs/{run_id}").json()
    [route] = [e for e in stored["trace"] if e.get("step") == "Route"]
    assert (route["effect"], route["reason"]) == ("refused", why)
    assert "error" not in route

    with Session(pg_engine) as session:
        recorded = stored_recording(session, run_id)
    mark = fhir_server.mark()
    deployment = client.app.state.container.running.catalog.current().find("triage")  # type: ignore[attr-defined]
    report = replay_run(deployment.ontology, recorded)

    assert report.same, report.divergences
    assert report.outcome is not None and report.outcome.terminal == "Done"
    properties = {str(f[1]) for f in report.outcome.facts}
    assert "acuity" in properties and "queuedAt" not in properties  # nothing asserted
    [replayed] = [e for e in report.outcome.trace if e.step == "Route"]
    assert (replayed.effect, replayed.reason) == ("refused", why)
    assert fhir_server.requests(since=mark) == []


def test_a_lost_answer_is_settled_by_horismos_reconcile(
    client: TestClient, fhir_server: FhirServer, pg_url: str, pg_engine: Engine
) -> None:
    patient, encounter = _patient_and_encounter(fhir_server)
    prefetch = _prefetch(patient, encounter, [_heart_rate(patient["id"], 160)])
    origin = fhir_server.base_url.removesuffix("/fhir")

    with dropping_proxy(origin) as (proxy, forwarded):
        run_id, run, _ = _answer(
            client.post(
                "/cds-services/horismos-triage",
                json=_hook(proxy + "/fhir", patient, encounter, prefetch=prefetch),
            )
        )
    # the patch's answer was lost, so the run escalated; that message's answers were lost too
    assert forwarded == [f"/fhir/Encounter/{encounter['id']}"] + ["/fhir/Communication"] * 2
    assert run["terminal"] == "EscalateToNurse"
    assert [e["state"] for e in effect_reports(pg_engine, run_id)] == ["unknown", "unknown"]

    # The effects name the (now closed) proxy's address: reconciliation cannot tell yet.
    assert _reconcile(pg_url) == (1, ["unknown", "unknown"])
    assert [e["state"] for e in effect_reports(pg_engine, run_id)] == ["unknown", "unknown"]

    port = int(proxy.rsplit(":", 1)[1])
    with dropping_proxy(origin, drop_writes=False, port=port):
        assert _reconcile(pg_url) == (0, ["accepted", "accepted"])

    patch, create = sorted(
        effect_reports(pg_engine, run_id), key=lambda e: e["operation"] != "patch"
    )
    current = fhir_server.read("Encounter", encounter["id"])
    assert (patch["state"], patch["newVersion"]) == ("accepted", current["meta"]["versionId"])
    assert _codes(current) == ["EM"]
    assert create["state"] == "accepted" and create["created"].startswith("Communication/")


def _reconcile(url: str) -> tuple[int, list[str]]:
    done = subprocess.run(
        [str(Path(sys.executable).with_name("horismos")), "reconcile", "--url", url, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stderr == ""
    return done.returncode, [json.loads(line)["after"] for line in done.stdout.splitlines()]


def test_accepted_feedback_reconciles_the_write_the_ehr_made_itself(
    client: TestClient, fhir_server: FhirServer, pg_engine: Engine
) -> None:
    patient, encounter = _patient_and_encounter(fhir_server)
    prefetch = _prefetch(patient, encounter, [_heart_rate(patient["id"], 160)])
    run_id, _, cards = _answer(
        client.post(
            "/cds-services/horismos-triage",
            json=_hook(
                fhir_server.base_url, patient, encounter, scope=READ_ONLY_SCOPE, prefetch=prefetch
            ),
        )
    )
    assert [e["state"] for e in effect_reports(pg_engine, run_id)] == ["refused"]
    applied = fhir_server.update(
        {**encounter, "priority": {"coding": [{"system": PRIORITY, "code": "EM"}]}},
        if_match=encounter["meta"]["versionId"],
    )
    assert applied.status_code == 200

    feedback = client.post(
        "/cds-services/horismos-triage/feedback",
        json={
            "feedback": [
                {
                    "card": cards[0]["uuid"],
                    "outcome": "accepted",
                    "outcomeTimestamp": "2026-01-01T10:05:00Z",
                }
            ]
        },
    )

    assert feedback.status_code == 200, feedback.text
    [effect] = effect_reports(pg_engine, run_id)
    assert (effect["state"], effect["newVersion"]) == (
        "accepted",
        applied.json()["meta"]["versionId"],
    )
