"""One Runner hosts every run: hook runs carry real timings, a resumed hook run keeps what the EHR
was answered and its replay material, and the trace is stored once (both backends)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine, select

from app.runtime.host import stored_recording
from app.runtime.trace import TraceEntry, parse_trace
from app.store import Run, session_scope
from tests.cds import clinical as fx

ROOT = Path(__file__).resolve().parents[2]
HOOK_WAIT = ROOT / "tests/data/runtime/hook_wait.ttl"

OpenClient = Callable[..., AbstractContextManager[TestClient]]


def _steps(trace: list[TraceEntry]) -> list[TraceEntry]:
    out: list[TraceEntry] = []
    for entry in trace:
        out.append(entry)
        if entry.subflow is not None:
            out.extend(_steps(entry.subflow.trace))
    return out


def test_every_step_of_a_hook_run_has_a_measured_duration(
    make_app_client: OpenClient, engine: Engine
) -> None:
    with make_app_client() as client:
        answer = client.post(
            "/cds-services/horismos-triage", json=fx.example("triage-encounter-start.json")
        )
        assert answer.status_code == 200, answer.text
        run_id = answer.json()["extension"]["dev.horismos.run"]["runId"]
        stored = client.get(f"/runs/{run_id}").json()

    trace = parse_trace(stored["trace"])
    assert [e.step for e in trace][:2] == ["Intake", "Assess"]
    for entry in _steps(trace):
        assert entry.elapsedMs is not None and entry.elapsedMs > 0, entry.step
        assert entry.at is not None and entry.finished is not None and entry.at <= entry.finished
        for call in entry.calls:
            assert call.elapsedMs is not None and call.elapsedMs > 0, (entry.step, call)
    assert any(entry.calls for entry in trace)  # the Route step's write attempt is measured
    # the trace is stored once: in trace_events, not again in the outcome document
    with session_scope(engine) as session:
        document = session.execute(select(Run.outcome).where(Run.id == run_id)).scalar_one()
    assert "trace" not in document and document["traceVersion"] == 1


def _hook_wait_request() -> dict[str, Any]:
    pid = "p-" + fx.new_id()
    return fx.order_sign(pid, [fx.draft_order(pid, "5640")], fhir_server=None)


def test_resuming_a_hook_run_keeps_its_hook_response_and_replay_material(
    make_app_client: OpenClient, engine: Engine
) -> None:
    request = _hook_wait_request()
    with make_app_client(ontology_paths=[HOOK_WAIT]) as client:
        answered = client.post("/cds-services/hook-wait", json=request)
        assert answered.status_code == 200, answered.text
        run = answered.json()["extension"]["dev.horismos.run"]
        run_id = run["runId"]
        assert [c["summary"] for c in answered.json()["cards"]] == ["Held for the pharmacist"]
        waiting = client.get(f"/runs/{run_id}").json()
        assert (waiting["status"], waiting["waitingAt"]) == ("suspended", "AwaitPharmacist")

        resumed = client.post(
            f"/runs/{run_id}/resume", json={"instances": [{"id": request["context"]["patientId"]}]}
        )
        assert resumed.status_code == 200, resumed.text
        resumed = client.post(
            f"/runs/{run_id}/resume",
            json={"instances": [{"id": request["context"]["patientId"], "confirmed": True}]},
        )
        assert resumed.status_code == 200, resumed.text
        assert (resumed.json()["status"], resumed.json()["terminal"]) == ("completed", "Done")

        # the EHR retrying its hookInstance still gets exactly what it was answered
        retried = client.post("/cds-services/hook-wait", json=request)
        assert retried.status_code == 200 and retried.json() == answered.json()
        done = client.get(f"/runs/{run_id}").json()

    assert "waitingAt" not in done and done["terminal"] == "Done"
    assert done["dataQuality"] == waiting["dataQuality"]  # what the hook run noted stays
    assert done["inputs"] == waiting["inputs"] and waiting["inputs"]  # and what it could read
    steps = [e.step for e in parse_trace(done["trace"])]
    assert steps == ["Decide", "AwaitPharmacist", "AwaitPharmacist", "AwaitPharmacist", "Done"]
    with session_scope(engine) as session:
        recorded = stored_recording(session, run_id)  # the replay material survived
    assert recorded.outcome["runId"] == run_id and recorded.input_world["instances"]
