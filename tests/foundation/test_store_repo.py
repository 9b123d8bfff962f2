"""The run store and the other store modules on both backends: what the service relies on
when it stores runs."""

from __future__ import annotations

import shutil
import sqlite3
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import IntegrityError

from app.store import feedback as feedback_store
from app.store import jtis, make_engine, repo, session_scope
from app.store.db import RUN_STORE_APPLICATION
from app.store.effects import EffectLog, EffectRow, list_effects
from app.store.models import new_id
from app.store.run_rows import CardIssue, NewRun, RunColumns
from app.store.runs import RunStore

WF = "https://example.org/ns#Triage"
DEPLOYMENT = "https://example.org/deployments#triage"


def _claim(engine: Engine, hook_instance: str | None = "hi-1", service_id: str = "svc") -> bool:
    row = cast(
        RunColumns,
        {
            "id": new_id(),
            "workflow_iri": WF,
            "service_id": service_id,
            "hook": "patient-view",
            "hook_instance": hook_instance,
            "request_digest": "sha256:abc",
        },
    )
    with engine.begin() as connection:
        return RunStore.of(engine).claim(connection, row)


def _run_id(engine: Engine, hook_instance: str = "hi-1", service_id: str = "svc") -> str:
    with engine.begin() as connection:
        found = repo.hook_run(connection, service_id, hook_instance)
    assert found is not None
    return str(found["id"])


def _new_run(hook_instance: str, **columns: Any) -> NewRun:
    return NewRun(
        columns=cast(
            RunColumns,
            {
                "id": new_id(),
                "workflow_iri": WF,
                "service_id": "svc",
                "hook": "order-sign",
                "hook_instance": hook_instance,
                "deployment": DEPLOYMENT,
                "status": "completed",
                "terminal": "Done",
                "decision": {"property": "acuity", "value": "Immediate"},
                "outcome": {"proof": {"fact": "x"}},
                "response": {"cards": [{"summary": "s", "indicator": "info"}]},
                "input": b"\x00compressed",
                **columns,
            },
        ),
        trace=[
            {"step": "Assess", "kind": "ReasoningStep", "edge": "next"},
            {"step": "Done", "kind": ""},
        ],
        sources=[
            {
                "resource_type": "Observation",
                "resource_id": "hr-1",
                "version_id": "3",
                "last_updated": "2026-01-01T00:00:00Z",
                "content_hash": "sha256:1",
            },
            {"resource_type": "Patient", "id": "p-1"},
        ],
        cards=[CardIssue(uuid=f"c-{hook_instance}", key="Acuity {value}", rules=("r1", "r2"))],
        effects=[
            {
                "effect_id": "e-1",
                "tool": "https://example.org/ns#Flag",
                "target_reference": "Patient/p-1",
                "expected_version": "4",
                "state": "refused",
                "attempts": 0,
                "remote_response": {"reason": "no write access"},
            }
        ],
    )


def test_retried_hook_instance_is_claimed_once(engine: Engine) -> None:
    assert (_claim(engine), _claim(engine)) == (True, False)


def test_hook_instance_is_unique_per_service_only(engine: Engine) -> None:
    assert _claim(engine, service_id="svc-a") and _claim(engine, service_id="svc-b")
    assert _run_id(engine, service_id="svc-a") != _run_id(engine, service_id="svc-b")


def test_runs_without_hook_instance_are_always_new(engine: Engine) -> None:
    assert _claim(engine, hook_instance=None) and _claim(engine, hook_instance=None)


def test_concurrent_identical_claims_create_exactly_one_run(engine: Engine) -> None:
    barrier = threading.Barrier(2)
    results: list[bool] = []
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
    assert sorted(results) == [False, True]


def test_a_recorded_run_is_stored_complete(engine: Engine) -> None:
    store = RunStore.of(engine)
    run = _new_run("hi-rec")
    found = store.record(run, deployment=DEPLOYMENT, generation=0)
    assert found == (0, None, True)
    run_id = run.columns["id"]
    with session_scope(engine) as session:
        stored = repo.get_run(session, run_id)
        assert stored is not None
        assert (stored.status, stored.terminal, stored.hook_instance) == (
            "completed",
            "Done",
            "hi-rec",
        )
        assert stored.decision == {"property": "acuity", "value": "Immediate"}
        assert stored.response == {"cards": [{"summary": "s", "indicator": "info"}]}
        assert repo.run_input(session, run_id) == b"\x00compressed"
        events = repo.list_trace(session, run_id)
        assert [(e.seq, e.step, e.kind) for e in events] == [
            (0, "Assess", "ReasoningStep"),
            (1, "Done", "event"),
        ]
        assert events[0].payload["edge"] == "next"
        assert [
            (s.resource_type, s.resource_id, s.version_id)
            for s in repo.list_sources(session, run_id)
        ] == [
            ("Observation", "hr-1", "3"),
            ("Patient", "p-1", None),
        ]
        [effect] = list_effects(session, run_id=run_id)
        assert (effect.effect_id, effect.state, effect.attempts, effect.remote_response) == (
            "e-1",
            "refused",
            0,
            {"reason": "no write access"},
        )
        card = feedback_store.issued_cards(session, "svc", ["c-hi-rec"])["c-hi-rec"]
        assert (card.run_id, card.card_key, card.rules) == (run_id, "Acuity {value}", ("r1", "r2"))


def test_a_run_whose_deployment_moved_is_not_stored(engine: Engine) -> None:
    store = RunStore.of(engine)
    run = _new_run("hi-moved")
    found = store.record(run, deployment=DEPLOYMENT, generation=3)
    assert found == (0, None, False)
    with session_scope(engine) as session:
        assert repo.get_run(session, run.columns["id"]) is None
        assert repo.list_trace(session, run.columns["id"]) == []
        assert list_effects(session, run_id=run.columns["id"]) == []


def test_a_run_whose_twin_stored_first_stores_nothing(engine: Engine) -> None:
    store = RunStore.of(engine)
    first, second = _new_run("hi-twin"), _new_run("hi-twin", terminal="Other")
    assert store.record(first, deployment=DEPLOYMENT, generation=0).stored
    assert not store.record(second, deployment=DEPLOYMENT, generation=0).stored
    with session_scope(engine) as session:
        assert repo.get_run(session, second.columns["id"]) is None
        assert len(repo.list_trace(session, first.columns["id"])) == 2


def test_a_suspended_run_resumes_with_its_trace_continued(engine: Engine) -> None:
    store = RunStore.of(engine)
    deadline = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    run = _new_run(
        "hi-wait",
        status="suspended",
        terminal=None,
        world_state={"facts": [1, 2]},
        position="https://example.org/ns#Wait",
        wait_deadline=deadline,
    )
    assert store.record(run, deployment=DEPLOYMENT, generation=0).stored
    run_id = run.columns["id"]
    with session_scope(engine) as session:
        due = repo.list_runs(session, status="suspended", due_before=deadline + timedelta(1))
        assert [r.id for r in due] == [run_id]
        assert due[0].wait_deadline == deadline
        assert due[0].world_state == {"facts": [1, 2]}
        assert repo.list_runs(session, status="suspended", due_before=deadline - timedelta(1)) == []
    done: RunColumns = {"status": "completed", "terminal": "Done", "world_state": None}
    with engine.begin() as connection:
        store.resume(
            connection,
            run_id,
            done,
            [{"step": "Done", "kind": "Step", "again": True}, {"step": "End", "kind": "Step"}],
            from_seq=1,
        )
    with session_scope(engine) as session:
        trace = repo.list_trace(session, run_id)
        assert [(e.seq, e.step) for e in trace] == [(0, "Assess"), (1, "Done"), (2, "End")]
        assert trace[1].payload.get("again") is True
        assert repo.list_runs(session, status="suspended") == []


def test_a_fenced_finish_fails_once_the_run_was_taken_over(engine: Engine) -> None:
    store = RunStore.of(engine)
    now = datetime.now(UTC)
    assert _claim(engine, hook_instance="hi-lease")
    run_id = _run_id(engine, hook_instance="hi-lease")
    with engine.begin() as connection:
        assert store.take_over(connection, run_id, owner="a", until=now, now=now)
        assert store.renew(connection, ["a", "b"], now + timedelta(seconds=30)) == {"a"}
        # a live lease cannot be taken
        assert not store.take_over(connection, run_id, owner="b", until=now, now=now)
    with engine.begin() as connection:
        later = now + timedelta(seconds=31)
        assert store.take_over(connection, run_id, owner="b", until=later, now=later)
    with engine.begin() as connection:
        assert not store.fail(connection, run_id, owner="a")
        assert store.fail(connection, run_id, owner="b")
    with session_scope(engine) as session:
        run = repo.get_run(session, run_id)
        assert run is not None and run.status == "failed"


def test_a_wrong_trace_start_is_refused_and_stores_nothing(engine: Engine) -> None:
    store = RunStore.of(engine)
    run = _new_run("hi-start")
    assert store.record(run, deployment=DEPLOYMENT, generation=0).stored
    run_id = run.columns["id"]
    with pytest.raises(IntegrityError), engine.begin() as connection:
        store.finish(connection, run_id, {"status": "failed"}, owner=None)
        store.add_trace(connection, run_id, [{"step": "X", "kind": "Step"}], first_seq=0)
    with session_scope(engine) as session:
        assert [e.step for e in repo.list_trace(session, run_id)] == ["Assess", "Done"]
        stored = repo.get_run(session, run_id)
        assert stored is not None and stored.status == "completed"


@pytest.mark.postgres
def test_a_connection_the_server_closed_is_replaced_without_losing_the_run(
    pg_engine: Engine,
) -> None:
    store = RunStore.of(pg_engine)
    assert store.record(_new_run("hi-before"), deployment=DEPLOYMENT, generation=0).stored
    with pg_engine.connect() as connection:  # a restart or an idle timeout, as the pool sees it
        ended = connection.execute(
            text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = :name AND datname = current_database()"
            ),
            {"name": RUN_STORE_APPLICATION},
        ).scalar_one()
    assert ended >= 1
    run = _new_run("hi-after")
    assert store.record(run, deployment=DEPLOYMENT, generation=0).stored
    with session_scope(pg_engine) as session:
        stored = repo.get_run(session, run.columns["id"])
        assert stored is not None and len(repo.list_trace(session, stored.id)) == 2


def test_an_unknown_status_is_refused(engine: Engine) -> None:
    with pytest.raises(ValueError, match="unknown run status"), engine.begin() as connection:
        RunStore.of(engine).finish(connection, "nope", {"status": "done"}, owner=None)


def test_effects_move_through_their_states(engine: Engine) -> None:
    _claim(engine)
    run_id = _run_id(engine)
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
    _claim(engine)
    run_id = _run_id(engine)
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
        _claim(engine)
        run_id = _run_id(engine)
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
            RunStore.of(engine).finish(
                session.connection(), run_id, {"status": "completed"}, owner=None
            )
        with session_scope(engine) as session:
            run = repo.get_run(session, run_id)
            assert run is not None and run.status == "completed"
    finally:
        engine.dispose()
