"""A hook call's run outlives neither its process nor the EHR's patience: a run abandoned by a
dead process is taken over by a retry once its lease expires, or ended by the periodic task; a
call past its deadline is a 503 the EHR can retry, and sends no write after it (real database on
both backends, real HTTP through the ASGI app, loopback FHIR servers)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from app.cds.accept import request_digest
from app.store.models import utcnow
from app.store.runs import RunStore
from tests.cds import clinical as fx
from tests.support.rogue_http import Answer, rogue_server

OpenClient = Callable[..., AbstractContextManager[TestClient]]
TRIAGE = "/cds-services/horismos-triage"
WRITE = "user/*.read user/Encounter.write"
EM = {"coding": [{"system": "http://terminology.hl7.org/CodeSystem/v3-ActPriority", "code": "EM"}]}


@pytest.fixture
def client(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client(reconcile_interval_seconds=0, run_lease_seconds=2) as c:
        yield c


def triage_body(fhir_server: str | None = None, scope: str = WRITE) -> dict[str, Any]:
    pid, eid = fx.new_id(), fx.new_id()
    encounter = fx.encounter(eid, pid)
    encounter["meta"] = {"versionId": "1"}
    return fx.hook_request(
        "encounter-start",
        {"patientId": pid, "encounterId": eid},
        fhir_server=fhir_server,
        scope=scope,
        prefetch={
            "patient": fx.patient(pid),
            "encounter": encounter,
            "vitals": fx.searchset([fx.observation(pid, "8867-4", 160, "/min")]),
            "conditions": fx.searchset([]),
        },
    )


def _dead_claim(engine: Engine, body: dict[str, Any], *, lease_left: float) -> str:
    """The row a process leaves when it is killed after claiming the run of ``body``."""
    run_id = str(uuid.uuid4())
    with engine.begin() as connection:
        RunStore.of(engine).claim(
            connection,
            {
                "id": run_id,
                "service_id": "horismos-triage",
                "hook": "encounter-start",
                "hook_instance": body["hookInstance"],
                "workflow_iri": "https://horismos.dev/example/triage#Triage",
                "request_digest": request_digest(body),
                "status": "running",
                "lease_owner": "a-process-that-died",
                "lease_expires_at": utcnow() + timedelta(seconds=lease_left),
            },
        )
    return run_id


def _response_stored(engine: Engine, hook_instance: str) -> bool:
    with engine.connect() as connection:
        return bool(
            connection.execute(
                text(
                    "SELECT count(*) FROM runs WHERE hook_instance = :hi AND response IS NOT NULL"
                ),
                {"hi": hook_instance},
            ).scalar_one()
        )


def _status(engine: Engine, run_id: str) -> str:
    with engine.connect() as connection:
        return str(
            connection.execute(
                text("SELECT status FROM runs WHERE id = :id"), {"id": run_id}
            ).scalar_one()
        )


def test_a_run_left_running_by_a_dead_process_is_taken_over_by_the_retry(
    client: TestClient, engine: Engine
) -> None:
    body = triage_body()
    run_id = _dead_claim(engine, body, lease_left=-1)
    shown = client.get(f"/runs/{run_id}")
    assert shown.status_code == 200, shown.text  # the row exists: it is shown, not a 404
    assert shown.json()["status"] == "running"
    page = client.get(f"/runs/{run_id}", headers={"accept": "text/html"})
    assert page.status_code == 200
    assert client.post(f"/runs/{run_id}/resume", json={}).status_code == 409  # not waiting
    started = time.monotonic()
    retry = client.post(TRIAGE, json=body)
    assert retry.status_code == 200, retry.text
    assert time.monotonic() - started < 10  # not the 35 s wait for a holder that is gone
    assert retry.json()["extension"]["dev.horismos.run"]["runId"] == run_id
    assert _status(engine, run_id) == "completed"
    assert client.post(TRIAGE, json=body).json() == retry.json()  # stored, verbatim


def test_a_retry_waits_for_a_live_holder_and_takes_over_when_its_lease_runs_out(
    client: TestClient, engine: Engine
) -> None:
    body = triage_body()
    run_id = _dead_claim(engine, body, lease_left=1.5)  # killed just now: the lease still runs
    retry = client.post(TRIAGE, json=body)
    assert retry.status_code == 200, retry.text
    assert retry.json()["extension"]["dev.horismos.run"]["runId"] == run_id


def test_a_run_nobody_retries_is_ended_failed_by_the_periodic_task(
    client: TestClient, engine: Engine
) -> None:
    from app.api.maintenance import tick

    body = triage_body()
    run_id = _dead_claim(engine, body, lease_left=-1)
    report = tick(client.app, now=utcnow() + timedelta(minutes=10))  # type: ignore[arg-type]
    assert report.abandoned == [run_id]
    assert _status(engine, run_id) == "failed"
    trace = client.get(f"/runs/{run_id}").json()["trace"]
    assert [e["kind"] for e in trace] == ["abandoned"]
    retry = client.post(TRIAGE, json=body)
    assert retry.status_code == 409  # at once: send a new hookInstance
    assert "new hookInstance" in retry.text


def test_a_dead_process_write_is_reconciled_before_anything_is_sent_again(
    client: TestClient, engine: Engine
) -> None:
    """The dead process sent its write and died before the answer: the write landed. The retry
    reads the record back, finds the change, and sends nothing."""
    with rogue_server() as fhir:
        body = triage_body(fhir.base + "/fhir")
        eid = body["context"]["encounterId"]
        landed = {**body["prefetch"]["encounter"], "meta": {"versionId": "2"}}
        landed["priority"] = {
            "coding": [
                {"system": "http://terminology.hl7.org/CodeSystem/v3-ActPriority", "code": "EM"}
            ]
        }
        fhir.on(f"/fhir/Encounter/{eid}", Answer.json(landed))
        fhir.on(
            f"/fhir/Encounter/{eid}/_history",
            Answer.json(
                {
                    "resourceType": "Bundle",
                    "type": "history",
                    "entry": [
                        {
                            "resource": {
                                **body["prefetch"]["encounter"],
                                "meta": {"versionId": "1", "lastUpdated": "2026-01-01T00:00:00Z"},
                            }
                        },
                        {
                            "resource": {
                                **landed,
                                "meta": {"versionId": "2", "lastUpdated": "2026-01-01T00:01:00Z"},
                            }
                        },
                    ],
                }
            ),
        )
        run_id = _dead_claim(engine, body, lease_left=-1)
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO effects (run_id, effect_id, tool, target_reference,"
                    " expected_version, state, attempts, remote_response, created_at,"
                    " updated_at) VALUES (:run, :effect, :tool, :target, '1', 'attempted', 1,"
                    " :response, :now, :now)"
                ),
                {
                    "run": run_id,
                    "effect": f"ehr.assign_queue:Encounter/{eid}.priority",
                    "tool": "https://horismos.dev/example/triage#ehr.assign_queue",
                    "target": f"{fhir.base}/fhir/Encounter/{eid}",
                    "response": json.dumps(
                        {
                            "change": {
                                "resourceType": "Encounter",
                                "element": "priority",
                                "value": EM,
                            }
                        }
                    ),
                    "now": utcnow(),
                },
            )
        retry = client.post(TRIAGE, json=body)
        assert retry.status_code == 200, retry.text
        assert [s.method for s in fhir.seen if s.method != "GET"] == []  # nothing sent again
        [card] = retry.json()["cards"]
        # the write succeeded: the card shows the decision and no write-back notice
        assert card["detail"].startswith("**Immediate**"), card["detail"]
        assert "EHR" not in card["detail"], card["detail"]
    with engine.connect() as connection:
        state = connection.execute(text("SELECT state FROM effects")).scalar_one()
    assert state == "accepted"


def test_a_call_past_its_deadline_is_503_sends_no_write_and_its_retry_gets_the_answer(
    make_app_client: OpenClient, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.cds import claim as claim_module

    release = threading.Event()
    original = claim_module.ClaimFirstTools.invoke

    def slow_tool(self: Any, *args: Any, **kwargs: Any) -> Any:
        release.wait(30)  # a step that takes longer than the EHR waits
        return original(self, *args, **kwargs)

    monkeypatch.setattr(claim_module.ClaimFirstTools, "invoke", slow_tool)
    with (
        rogue_server() as fhir,
        make_app_client(reconcile_interval_seconds=0, hook_deadline_seconds=1) as c,
    ):
        body = triage_body(fhir.base + "/fhir")
        started = time.monotonic()
        first = c.post(TRIAGE, json=body)
        assert first.status_code == 503, first.text
        assert time.monotonic() - started < 5
        assert first.headers["retry-after"]
        assert "deadline" in first.json()["issue"][0]["diagnostics"]
        release.set()
        # the abandoned run carries on and stores its answer (waited for, with a deadline)
        deadline, pause = time.monotonic() + 30, threading.Event()
        while not _response_stored(engine, body["hookInstance"]):
            assert time.monotonic() < deadline, "the run never stored its answer"
            pause.wait(0.05)
        retry = c.post(TRIAGE, json=body)
        assert retry.status_code == 200, retry.text
        assert [s for s in fhir.seen if s.method != "GET"] == []  # no write after the deadline
        [card] = retry.json()["cards"]
        assert "deadline" in card["detail"], card["detail"]
