"""Repository functions on both backends: what the service relies on when it stores runs."""

from __future__ import annotations

import shutil
import sqlite3
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError

from app.errors import NotFound
from app.store import feedback as feedback_store
from app.store import jtis, make_engine, repo, session_scope
from app.store.effects import EffectLog, EffectRow, list_effects

WF = "https://example.org/ns#Triage"


def _claim(
    engine: Engine, hook_instance: str = "hi-1", service_id: str = "svc"
) -> tuple[str, bool]:
    with session_scope(engine) as session:
        run, created = repo.claim_run(
            session,
            workflow_iri=WF,
            service_id=service_id,
            hook="patient-view",
            hook_instance=hook_instance,
            request_digest="sha256:abc",
        )
        return run.id, created


def test_retried_hook_instance_returns_the_same_run(engine: Engine) -> None:
    first, created_first = _claim(engine)
    second, created_second = _claim(engine)
    assert (created_first, created_second) == (True, False)
    assert first == second


def test_hook_instance_is_unique_per_service_only(engine: Engine) -> None:
    a, _ = _claim(engine, service_id="svc-a")
    b, created = _claim(engine, service_id="svc-b")
    assert created and a != b


def test_runs_without_hook_instance_are_always_new(engine: Engine) -> None:
    with session_scope(engine) as session:
        r1, c1 = repo.claim_run(session, workflow_iri=WF)
        r2, c2 = repo.claim_run(session, workflow_iri=WF)
    assert c1 and c2 and r1.id != r2.id


def test_concurrent_identical_claims_create_exactly_one_run(engine: Engine) -> None:
    barrier = threading.Barrier(2)
    results: list[tuple[str, bool]] = []
    errors: list[BaseException] = []

    def claim() -> None:
        try:
            barrier.wait()
            results.append(_claim(engine, hook_instance="concurrent"))
        except BaseException as exc:  # reported below; a thread must not swallow it
            errors.append(exc)

    threads = [threading.Thread(target=claim) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(created for _, created in results) == [False, True]
    assert len({run_id for run_id, _ in results}) == 1


def test_save_outcome_persists_trace_sources_and_response(engine: Engine) -> None:
    run_id, _ = _claim(engine)
    trace = [
        {"step": "Assess", "kind": "ReasoningStep", "edge": "next"},
        {"step": "Done", "kind": "Step"},
    ]
    sources = [
        {
            "resource_type": "Observation",
            "resource_id": "hr-1",
            "version_id": "3",
            "last_updated": "2026-01-01T00:00:00Z",
            "content_hash": "sha256:1",
        }
    ]
    with session_scope(engine) as session:
        repo.save_outcome(
            session,
            run_id,
            status="completed",
            terminal="Done",
            decision={"property": "acuity", "value": "Immediate"},
            outcome={"runId": run_id, "proof": {"fact": "x"}},
            response={"cards": [{"summary": "s"}]},
            trace=trace,
            sources=sources,
        )
    with session_scope(engine) as session:
        run = repo.get_run(session, run_id)
        assert run is not None
        assert run.status == "completed"
        assert run.decision == {"property": "acuity", "value": "Immediate"}
        assert run.response == {"cards": [{"summary": "s"}]}
        assert run.world_state is None
        events = repo.list_trace(session, run_id)
        assert [(e.seq, e.step, e.kind) for e in events] == [
            (0, "Assess", "ReasoningStep"),
            (1, "Done", "Step"),
        ]
        assert events[0].payload["edge"] == "next"
        (source,) = repo.list_sources(session, run_id)
        assert (source.resource_type, source.resource_id, source.version_id) == (
            "Observation",
            "hr-1",
            "3",
        )


def test_suspended_run_keeps_world_and_deadline_then_resumes(engine: Engine) -> None:
    run_id, _ = _claim(engine)
    deadline = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    with session_scope(engine) as session:
        repo.save_outcome(
            session,
            run_id,
            status="suspended",
            terminal=None,
            decision=None,
            outcome=None,
            trace=[{"step": "Wait", "kind": "WaitStep"}],
            world_state={"facts": [1, 2]},
            position="https://example.org/ns#Wait",
            wait_deadline=deadline,
        )
    with session_scope(engine) as session:
        due = repo.list_runs(session, status="suspended", due_before=deadline + timedelta(1))
        assert [r.id for r in due] == [run_id]
        assert due[0].wait_deadline == deadline
        assert due[0].world_state == {"facts": [1, 2]}
        assert repo.list_runs(session, status="suspended", due_before=deadline - timedelta(1)) == []
        repo.save_outcome(
            session,
            run_id,
            status="completed",
            terminal="Done",
            decision=None,
            outcome={},
            trace=[{"step": "Done", "kind": "Step"}],
        )
    with session_scope(engine) as session:
        assert [e.seq for e in repo.list_trace(session, run_id)] == [0, 1]
        assert repo.list_runs(session, status="suspended") == []


def test_a_failed_save_leaves_nothing_behind(engine: Engine) -> None:
    run_id, _ = _claim(engine)
    with pytest.raises(IntegrityError), session_scope(engine) as session:
        repo.save_outcome(
            session,
            run_id,
            status="completed",
            terminal="Done",
            decision=None,
            outcome={},
            trace=[{"step": "A", "kind": "Step"}],
            sources=[{"resource_type": "Patient", "resource_id": None}],
        )
    with session_scope(engine) as session:
        run = repo.get_run(session, run_id)
        assert run is not None and run.status == "running"
        assert repo.list_trace(session, run_id) == []


def test_save_outcome_for_unknown_run_is_not_found(engine: Engine) -> None:
    with pytest.raises(NotFound), session_scope(engine) as session:
        repo.save_outcome(
            session, "nope", status="failed", terminal=None, decision=None, outcome=None
        )


def test_effects_move_through_their_states(engine: Engine) -> None:
    run_id, _ = _claim(engine)
    log = EffectLog(engine)
    row = EffectRow(
        run_id=run_id,
        effect_id="e1",
        tool="https://example.org/ns#Order",
        target="ServiceRequest/7",
        expected="2",
    )
    log.attempt(row, {})
    log.set(run_id, "e1", "conflicted", {"status": 412})
    with session_scope(engine) as session:
        [done] = list_effects(session, state="conflicted")
        assert (done.effect_id, done.attempts, done.remote_response) == ("e1", 1, {"status": 412})
        assert list_effects(session, state=["proposed", "attempted"]) == []
    with pytest.raises(LookupError):
        log.set(run_id, "missing", "failed", {})


def test_identical_feedback_repost_is_harmless(engine: Engine) -> None:
    run_id, _ = _claim(engine)
    when = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
    with session_scope(engine) as session:
        _, created = feedback_store.add_feedback(
            session,
            service_id="svc",
            card_uuid="c-1",
            outcome="overridden",
            outcome_timestamp=when,
            override_reason={"code": "not-relevant"},
            run_id=run_id,
        )
        assert created
    with session_scope(engine) as session:
        row, created = feedback_store.add_feedback(
            session, service_id="svc", card_uuid="c-1", outcome="overridden", outcome_timestamp=when
        )
        assert not created
        assert row.override_reason == {"code": "not-relevant"}
        assert row.outcome_timestamp == when
        assert len(feedback_store.list_feedback(session, service_id="svc")) == 1


def test_a_jti_is_accepted_once_until_it_expires(engine: Engine) -> None:
    now = datetime.now(UTC)
    with session_scope(engine) as session:
        assert jtis.remember_jti(session, "https://ehr", "j1", now + timedelta(minutes=5))
        assert not jtis.remember_jti(session, "https://ehr", "j1", now + timedelta(minutes=5))
        assert jtis.remember_jti(session, "https://other", "j1", now + timedelta(minutes=5))
        assert jtis.remember_jti(session, "https://ehr", "old", now - timedelta(minutes=1))
        # The old token expired: its id no longer blocks a new token.
        assert jtis.remember_jti(session, "https://ehr", "old", now + timedelta(minutes=5))
    with session_scope(engine) as session:
        assert jtis.purge_expired_jtis(session, now + timedelta(minutes=10)) == 3


def test_naive_timestamps_are_refused(engine: Engine) -> None:
    with pytest.raises(Exception, match="naive datetime"), session_scope(engine) as session:
        jtis.remember_jti(session, "i", "j", datetime(2026, 1, 1))


def test_sqlite_read_then_write_is_not_failed_by_another_writer(
    sqlite_template: Path, tmp_path: Path
) -> None:
    # A deferred SQLite transaction that read first cannot write after another connection
    # committed; the store begins every transaction IMMEDIATE so the other writer waits.
    path = tmp_path / "h.db"
    shutil.copyfile(sqlite_template, path)
    engine = make_engine(f"sqlite:///{path}")
    try:
        run_id, _ = _claim(engine)
        with session_scope(engine) as session:
            assert repo.get_run(session, run_id) is not None
            other = sqlite3.connect(path, timeout=0, isolation_level=None)
            try:
                other.execute("BEGIN IMMEDIATE")
                other.execute("UPDATE runs SET hook = 'other'")
                other.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                assert "locked" in str(exc)
            finally:
                other.close()
            repo.save_outcome(
                session, run_id, status="completed", terminal="Done", decision=None, outcome={}
            )
        with session_scope(engine) as session:
            run = repo.get_run(session, run_id)
            assert run is not None and run.status == "completed"
    finally:
        engine.dispose()
