"""Data protection as an operator uses it: every decision about one patient is a query, and
`horismos purge` (or the periodic task) removes what is past the retention period, never a run
whose write may still be reconciled (real database on both backends, real HTTP, the real CLI)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError
from sqlalchemy import Engine, func, inspect, select, update

from app.settings import Settings
from app.store import (
    Effect,
    Feedback,
    IssuedCard,
    Run,
    SourceVersion,
    TraceEvent,
    repo,
    session_scope,
)
from app.store.retention import parse_retention
from tests.cds import clinical as fx
from tests.support.effects import log_effect

OpenClient = Callable[..., AbstractContextManager[TestClient]]
ROOT = Path(__file__).resolve().parents[2]
TRIAGE = "/cds-services/horismos-triage"
MED = "/cds-services/horismos-med-safety"


@pytest.fixture
def client(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client(
        public_base_url="https://cds.example.test", reconcile_interval_seconds=0
    ) as c:
        yield c


def med_safety(client: TestClient, pid: str) -> dict[str, Any]:
    resp = client.post(MED, json=fx.med_safety_body(pid))
    assert resp.status_code == 200, resp.text
    answer: dict[str, Any] = resp.json()
    return answer


def _run_id(answer: dict[str, Any]) -> str:
    return str(answer["extension"]["dev.horismos.run"]["runId"])


def test_every_decision_about_a_patient_is_an_indexed_query(
    client: TestClient, engine: Engine
) -> None:
    mine = [_run_id(med_safety(client, "p-ann")) for _ in range(3)]
    med_safety(client, "p-bob")
    with session_scope(engine) as session:
        found = {r.id for r in repo.list_runs(session, patient="p-ann")}
    assert found == set(mine)
    indexes = {tuple(i["column_names"]) for i in inspect(engine).get_indexes("runs")}
    assert ("patient",) in indexes


def _age(engine: Engine, run_id: str, days: int) -> None:
    with session_scope(engine) as session:
        session.execute(
            update(Run)
            .where(Run.id == run_id)
            .values(updated_at=datetime.now(UTC) - timedelta(days=days))
        )


def _count(engine: Engine, table: Any, run_id: str) -> int:
    with session_scope(engine) as session:
        column = table.id if table is Run else table.run_id
        return int(
            session.execute(
                select(func.count()).select_from(table).where(column == run_id)
            ).scalar_one()
        )


def _stored_about(engine: Engine, run_id: str) -> dict[str, int]:
    tables = (Run, TraceEvent, SourceVersion, Effect, IssuedCard, Feedback)
    return {t.__tablename__: _count(engine, t, run_id) for t in tables}


def _old_runs(client: TestClient, engine: Engine) -> dict[str, str]:
    """An old run with feedback, an old one whose write is still unknown, an old waiting one,
    and a recent one."""
    old = med_safety(client, "p-old")
    card = old["cards"][0]["uuid"]
    feedback = {"card": card, "outcome": "overridden", "outcomeTimestamp": "2025-01-01T00:00:00Z"}
    assert client.post(MED + "/feedback", json={"feedback": [feedback]}).status_code == 200
    runs = {
        "card": card,
        "old": _run_id(old),
        "pending": _run_id(med_safety(client, "p-pending")),
        "waiting": _run_id(med_safety(client, "p-waiting")),
        "recent": _run_id(med_safety(client, "p-recent")),
    }
    log_effect(
        engine,
        run_id=runs["pending"],
        effect_id="write:Encounter/e1.priority",
        tool="t",
        target="Encounter/e1",
        state="unknown",
    )
    with session_scope(engine) as session:
        session.execute(update(Run).where(Run.id == runs["waiting"]).values(status="suspended"))
    for name in ("old", "pending", "waiting"):
        _age(engine, runs[name], days=100)
    _age(engine, runs["recent"], days=10)
    return runs


def test_horismos_purge_deletes_everything_about_old_runs_but_keeps_pending_writes(
    client: TestClient, engine: Engine, database_url: str, tmp_path: Path
) -> None:
    runs = _old_runs(client, engine)
    before = _stored_about(engine, runs["old"])
    assert before["trace_events"] and before["source_versions"] and before["feedback"]
    assert before["issued_cards"]
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from app.cli import main; main()",
            "purge",
            "--older-than",
            "30d",
            "--url",
            database_url,
            "--json",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["deleted"]["runs"] == 1
    assert report["deleted"]["feedback"] == 1
    assert report["kept"] == 2  # the pending write and the waiting run
    assert set(_stored_about(engine, runs["old"]).values()) == {0}
    for name in ("pending", "waiting", "recent"):
        assert _count(engine, Run, runs[name]) == 1, name
    again = {"card": runs["card"], "outcome": "accepted", "outcomeTimestamp": "2025-01-02T00:00Z"}
    feedback = client.post(MED + "/feedback", json={"feedback": [again]})
    assert feedback.status_code == 400  # the purged card is unknown now


def test_the_periodic_task_purges_past_the_retention_period(
    make_app_client: OpenClient, engine: Engine
) -> None:
    from app.api.maintenance import tick

    with make_app_client(
        public_base_url="https://cds.example.test",
        reconcile_interval_seconds=0,
        retention_period="P30D",
    ) as c:
        runs = _old_runs(c, engine)
        report = tick(c.app)  # type: ignore[arg-type]
    assert report.purged["runs"] == 1
    assert _count(engine, Run, runs["old"]) == 0
    assert _count(engine, Run, runs["pending"]) == 1


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90d", 90 * 86400), ("12h", 43200), ("2w", 1209600), ("P90D", 90 * 86400), ("PT12H", 43200)],
)
def test_retention_periods_read_as_an_operator_writes_them(text: str, seconds: int) -> None:
    assert parse_retention(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["P1Y", "P3M", "soon", "0d", "-5d", "P", "PT"])
def test_a_retention_period_that_means_nothing_definite_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_retention(text)
    with pytest.raises(ValidationError, match="HORISMOS_RETENTION_PERIOD"):
        Settings(retention_period=text)


def test_purge_refuses_a_period_it_cannot_read(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from app.cli import main; main()", "purge", "--older-than", "P1Y"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "P365D" in done.stderr
