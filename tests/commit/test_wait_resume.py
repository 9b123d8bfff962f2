"""WaitStep end to end over HTTP on PostgreSQL: suspend, restart the service, resume, finish."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from app.api.maintenance import tick
from app.api.resume import resume_run
from app.main import create_app
from app.settings import Settings
from app.store import repo, session_scope

REVIEW = Path(__file__).resolve().parents[1] / "data" / "commit" / "review.ttl"
CASE = {"instances": [{"id": "c1", "class": "Case", "score": 7}]}

OpenService = Callable[..., AbstractContextManager[TestClient]]


@pytest.fixture
def service(pg_url: str, pg_engine: Engine) -> OpenService:
    """``with service() as client``: a fresh app instance over the same PostgreSQL database."""

    @contextmanager
    def open_service(**overrides: Any) -> Iterator[TestClient]:
        settings = Settings(
            database_url=pg_url,
            ontology_paths=[REVIEW],
            reconcile_interval_seconds=overrides.pop("interval", 0),
            **overrides,
        )
        with TestClient(create_app(settings)) as client:
            yield client

    return open_service


def _start(client: TestClient) -> str:
    started = client.post("/workflows/Review/runs", json=CASE)
    assert started.status_code == 200, started.text
    body = started.json()
    assert (body["status"], body["waitingAt"], body["terminal"]) == (
        "suspended",
        "AwaitReviewer",
        None,
    )
    run_id: str = body["runId"]
    return run_id


def _row(engine: Engine, run_id: str) -> tuple[str, str | None, Any, int]:
    with session_scope(engine) as session:
        run = repo.get_run(session, run_id)
        assert run is not None
        trace = repo.list_trace(session, run_id)
        return run.status, run.position, run.world_state, len(trace)


def test_a_waiting_run_survives_a_restart_and_finishes_when_resumed(
    service: OpenService, pg_engine: Engine
) -> None:
    with service() as first:
        run_id = _start(first)

    status, position, world_state, _ = _row(pg_engine, run_id)
    assert status == "suspended"
    assert position is not None and position.endswith("#AwaitReviewer")
    assert world_state is not None

    with service() as second:
        resumed = second.post(
            f"/runs/{run_id}/resume", json={"instances": [{"id": "c1", "approved": True}]}
        )
        assert resumed.status_code == 200, resumed.text
        body = resumed.json()
        stored = second.get(f"/runs/{run_id}").json()

    assert body["status"] == "completed"
    assert body["terminal"] == "Done"
    assert body["decision"] == {"property": "verdict", "value": "Proceed"}
    assert [e["step"] for e in body["trace"]][-3:] == ["AwaitReviewer", "Decide", "Done"]
    assert stored["terminal"] == "Done"
    assert _row(pg_engine, run_id)[:3] == ("completed", None, None)


def test_facts_the_gate_rejects_answer_400_and_leave_the_run_waiting(
    service: OpenService, pg_engine: Engine
) -> None:
    with service() as client:
        run_id = _start(client)
        before = _row(pg_engine, run_id)

        rejected = client.post(
            f"/runs/{run_id}/resume", json={"instances": [{"id": "c1", "approved": "maybe"}]}
        )

        assert rejected.status_code == 400
        assert rejected.headers["content-type"] == "application/problem+json"
        error = rejected.json()
        assert [(v["code"], v["subject"], v["value"]) for v in error["violations"]] == [
            ("range", "c1", "maybe")
        ]
        assert _row(pg_engine, run_id) == before

        held = client.post(
            f"/runs/{run_id}/resume", json={"instances": [{"id": "c1", "approved": False}]}
        )
        assert held.json()["decision"] == {"property": "verdict", "value": "Hold"}


def test_facts_without_the_awaited_property_keep_the_run_waiting(
    service: OpenService, pg_engine: Engine
) -> None:
    with service() as client:
        run_id = _start(client)

        partial = client.post(f"/runs/{run_id}/resume", json={"instances": []})

        assert partial.status_code == 200
        assert (partial.json()["status"], partial.json()["waitingAt"]) == (
            "suspended",
            "AwaitReviewer",
        )
        assert _row(pg_engine, run_id)[0] == "suspended"
        done = client.post(
            f"/runs/{run_id}/resume", json={"instances": [{"id": "c1", "approved": True}]}
        )
        assert done.json()["terminal"] == "Done"


def test_only_a_waiting_run_can_be_resumed(service: OpenService) -> None:
    with service() as client:
        run_id = _start(client)
        facts = {"instances": [{"id": "c1", "approved": True}]}
        assert client.post(f"/runs/{run_id}/resume", json=facts).status_code == 200

        again = client.post(f"/runs/{run_id}/resume", json=facts)
        missing = client.post("/runs/no-such-run/resume", json=facts)

    assert again.status_code == 409
    assert "completed" in again.json()["detail"]
    assert missing.status_code == 404


def test_a_resume_after_the_timeout_takes_the_timeout_edge_without_the_facts(
    service: OpenService, pg_engine: Engine
) -> None:
    with service() as client:
        run_id = _start(client)
        deployments = client.app.state.container.running.catalog.current()  # type: ignore[attr-defined]
    later = datetime.now(UTC) + timedelta(hours=2)

    outcome = resume_run(
        pg_engine, deployments, run_id, {"instances": [{"id": "c1", "approved": True}]}, now=later
    )

    assert outcome.terminal == "TimedOut"
    assert outcome.decision is None
    assert ["c1", "approved", True] not in outcome.facts
    assert _row(pg_engine, run_id)[0] == "completed"


def test_the_periodic_task_ends_overdue_waits_only(service: OpenService, pg_engine: Engine) -> None:
    with service(interval=3600) as client:
        app = client.app
        assert app.state.container.maintenance_task is not None  # type: ignore[attr-defined]
        run_id = _start(client)
        soon = tick(app, now=datetime.now(UTC) + timedelta(minutes=5))  # type: ignore[arg-type]
        assert soon.expired == []
        assert _row(pg_engine, run_id)[0] == "suspended"

        overdue = tick(app, now=datetime.now(UTC) + timedelta(hours=2))  # type: ignore[arg-type]

    assert overdue.expired == [run_id]
    assert _row(pg_engine, run_id)[0] == "completed"


def test_no_periodic_task_when_the_interval_is_zero(service: OpenService) -> None:
    with service(interval=0) as client:
        assert client.app.state.container.maintenance_task is None  # type: ignore[attr-defined]
