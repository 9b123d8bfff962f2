"""Saving an outcome with a known trace start: the hook path's one query fewer, never a gap."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError

from app.store import repo, session_scope

WF = "https://example.org/ns#Triage"


def _claimed(engine: Engine) -> str:
    with session_scope(engine) as session:
        run, _created = repo.claim_run(
            session, workflow_iri=WF, service_id="svc", hook_instance="hi-start"
        )
        return run.id


def test_a_fresh_run_saved_from_seq_zero_keeps_its_trace_in_order(engine: Engine) -> None:
    run_id = _claimed(engine)
    with session_scope(engine) as session:
        repo.save_outcome(
            session,
            run_id,
            status="completed",
            terminal="Done",
            decision=None,
            outcome={},
            trace=[{"step": "A", "kind": "Step"}, {"step": "B", "kind": "Step"}],
            first_seq=0,
        )
    with session_scope(engine) as session:
        assert [(e.seq, e.step) for e in repo.list_trace(session, run_id)] == [(0, "A"), (1, "B")]
        run = repo.get_run(session, run_id)
        assert run is not None and run.status == "completed"


def test_a_wrong_trace_start_is_refused_and_stores_nothing(engine: Engine) -> None:
    run_id = _claimed(engine)
    with session_scope(engine) as session:
        repo.save_outcome(
            session,
            run_id,
            status="suspended",
            terminal=None,
            decision=None,
            outcome=None,
            trace=[{"step": "Wait", "kind": "WaitStep"}],
        )
    with pytest.raises(IntegrityError), session_scope(engine) as session:
        repo.save_outcome(
            session,
            run_id,
            status="completed",
            terminal="Done",
            decision=None,
            outcome={},
            trace=[{"step": "Done", "kind": "Step"}],
            first_seq=0,
        )
    with session_scope(engine) as session:
        assert [e.step for e in repo.list_trace(session, run_id)] == ["Wait"]
        run = repo.get_run(session, run_id)
        assert run is not None and run.status == "suspended"


def test_a_claim_read_back_in_its_session_shows_the_saved_outcome(engine: Engine) -> None:
    with session_scope(engine) as session:
        run, _created = repo.claim_run(session, workflow_iri=WF)
        assert (run.status, run.response, run.outcome) == ("running", None, None)
        repo.save_outcome(
            session, run.id, status="completed", terminal="Done", decision=None, outcome={"a": 1}
        )
        again = repo.get_run(session, run.id)
        assert again is not None and (again.status, again.outcome) == ("completed", {"a": 1})
