"""The claim of a hook call's run when it sends nothing outside: the run's row, trace, source
versions and the effect log of a refused write are one transaction, and the unique
``(service, hookInstance)`` key decides between twins (real database on both backends, real
HTTP through the ASGI app)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

import app.cds.service as service
from app.bridge.mock import MockBridge
from app.cds.inline import InlineRuns
from app.store import Base
from tests.cds import clinical as fx
from tests.cds.card_markdown import decision_record_text

OpenClient = Callable[..., AbstractContextManager[TestClient]]
#: nothing listens there: a write would fail to connect, so any PUT would show as a failed effect
NO_SERVER = "http://127.0.0.1:9/fhir"
READ_ONLY = "user/Patient.read user/Observation.read user/Condition.read user/Encounter.read"


@pytest.fixture
def client(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client() as c:
        yield c


def triage_with_a_refused_write() -> dict[str, Any]:
    """A triage call whose Route step's write is refused (read-only grant): nothing leaves."""
    pid, eid = fx.new_id(), fx.new_id()
    return fx.hook_request(
        "encounter-start",
        {"patientId": pid, "encounterId": eid},
        fhir_server=NO_SERVER,
        scope=READ_ONLY,
        prefetch={
            "patient": fx.patient(pid),
            "encounter": fx.encounter(eid, pid),
            "vitals": fx.searchset(
                [fx.observation(pid, "8867-4", 150, "/min"), *fx.vital_signs(pid, skip={"8867-4"})]
            ),
            "conditions": fx.searchset([]),
        },
    )


def _count(engine: Engine, table: str) -> int:
    with engine.connect() as connection:
        return int(connection.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())


def test_twins_that_both_finish_their_run_store_one_and_answer_alike(
    client: TestClient, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both twins decide before either stores (held at a barrier): the second to commit
    stores nothing and answers with the first one's stored response. Each runs in a worker
    thread, as twins in two workers run side by side (on one event loop, a run that stays
    inside decides and stores with nothing in between)."""
    monkeypatch.setattr(InlineRuns, "stays_inside", lambda self, call: False)
    both_decided = threading.Barrier(2, timeout=30)
    store = service.store_run

    def store_after_both_decided(*args: Any, **kwargs: Any) -> str | None:
        both_decided.wait()
        return store(*args, **kwargs)

    monkeypatch.setattr(service, "store_run", store_after_both_decided)
    body = triage_with_a_refused_write()
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

    assert [a.status_code for a in answers] == [200, 200]
    assert answers[0].json() == answers[1].json()
    run_id = answers[0].json()["extension"]["dev.horismos.run"]["runId"]
    with engine.connect() as connection:
        runs = connection.execute(text("SELECT id, status FROM runs")).all()
        traced = connection.execute(text("SELECT DISTINCT run_id FROM trace_events")).all()
        effects = connection.execute(text("SELECT run_id, state FROM effects")).all()
    assert [tuple(r) for r in runs] == [(run_id, "completed")]
    assert [r[0] for r in traced] == [run_id]
    assert [tuple(e) for e in effects] == [(run_id, "refused")]  # the winner's, once


def test_a_refused_write_is_stored_with_its_run_or_not_at_all(
    client: TestClient, engine: Engine
) -> None:
    traces = Base.metadata.tables["trace_events"]
    with engine.begin() as connection:  # the trace table disappears: the run cannot be stored
        traces.drop(connection)
    try:
        failed = client.post("/cds-services/horismos-triage", json=triage_with_a_refused_write())
    finally:
        with engine.begin() as connection:
            traces.create(connection)
    assert failed.status_code == 503
    assert "acuity" not in failed.text.lower()
    assert _count(engine, "effects") == 0  # no refused write recorded for a run never stored
    with engine.connect() as connection:
        statuses = connection.execute(text("SELECT status FROM runs")).scalars().all()
    assert statuses == ["failed"]  # its retry is told so at once

    stored = client.post("/cds-services/horismos-triage", json=triage_with_a_refused_write())
    assert stored.status_code == 200
    run_id = stored.json()["extension"]["dev.horismos.run"]["runId"]
    with engine.connect() as connection:
        effects = connection.execute(text("SELECT run_id, state FROM effects")).all()
    assert [tuple(e) for e in effects] == [(run_id, "refused")]
    assert "was not written" in stored.json()["cards"][0]["detail"]


def test_a_retry_after_the_answer_stores_nothing_new_and_returns_it_verbatim(
    client: TestClient, engine: Engine
) -> None:
    body = triage_with_a_refused_write()
    first = client.post("/cds-services/horismos-triage", json=body)
    again = client.post("/cds-services/horismos-triage", json=body)
    assert first.status_code == again.status_code == 200
    # byte for byte: an EHR that compares or signs the body sees the same answer
    assert again.content == first.content
    run_id = first.json()["extension"]["dev.horismos.run"]["runId"]
    trace = client.get(f"/runs/{run_id}").json()["trace"]
    assert (_count(engine, "runs"), _count(engine, "effects")) == (1, 1)
    assert _count(engine, "trace_events") == len(trace)


# --- a run that calls the LLM Bridge claims first -------------------------------------------


def _perceiving(tmp_path: Path) -> tuple[dict[str, Any], Path]:
    """A triage call whose Intake step asks the (scripted) Bridge to read the visit reason."""
    script = tmp_path / "bridge.json"
    script.write_text(
        json.dumps({"extract": [{"output": {"Symptom": ["Symptom"]}, "confidence": 0.95}]})
    )
    pid, eid = fx.new_id(), fx.new_id()
    body = fx.hook_request(
        "encounter-start",
        {"patientId": pid, "encounterId": eid},
        fhir_server=NO_SERVER,
        scope=READ_ONLY,
        prefetch={
            "patient": fx.patient(pid),
            "encounter": fx.encounter(eid, pid, reason="feels generally unwell"),
            "vitals": fx.searchset(fx.vital_signs(pid)),
            "conditions": fx.searchset([]),
        },
    )
    return body, script


def test_twins_of_a_run_that_calls_the_bridge_call_it_once(
    make_app_client: OpenClient, engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The patient's text leaves the process once: the run claims its hookInstance before the
    Bridge call, and the twin that finds the claim waits for the stored answer."""
    body, script = _perceiving(tmp_path)
    calls: list[str] = []
    extract = MockBridge.extract

    def counted(self: MockBridge, *args: Any, **kwargs: Any) -> Any:
        calls.append(threading.current_thread().name)
        return extract(self, *args, **kwargs)

    monkeypatch.setattr(MockBridge, "extract", counted)
    answers: list[Any] = []
    start = threading.Barrier(2)
    with make_app_client(bridge_model=f"mock:{script}") as client:

        def call() -> None:
            start.wait()
            answers.append(client.post("/cds-services/horismos-triage", json=body))

        threads = [threading.Thread(target=call) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

        assert [a.status_code for a in answers] == [200, 200]
        assert answers[0].json() == answers[1].json()
        first = answers[0].json()["cards"][0]
        # read while the service runs: a request after its lifespan would open a connection
        # on the engine the lifespan disposed, and nothing would close it
        assert "Symptom recorded, no other criterion" in decision_record_text(client, first)
    assert len(calls) == 1
    assert _count(engine, "runs") == 1


def test_a_claim_the_store_refuses_is_503_before_the_bridge_is_called(
    make_app_client: OpenClient, engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body, script = _perceiving(tmp_path)
    called: list[bool] = []
    monkeypatch.setattr(MockBridge, "extract", lambda *a, **k: called.append(True))
    with make_app_client(bridge_model=f"mock:{script}") as client:
        with engine.begin() as connection:  # the runs table is gone: no claim can be taken
            connection.execute(text("ALTER TABLE runs RENAME TO runs_away"))
        try:
            resp = client.post("/cds-services/horismos-triage", json=body)
        finally:
            with engine.begin() as connection:
                connection.execute(text("ALTER TABLE runs_away RENAME TO runs"))
    assert resp.status_code == 503, resp.text
    assert resp.json()["resourceType"] == "OperationOutcome"
    assert called == []
