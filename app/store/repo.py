"""Reads of runs: their rows, traces and source versions. Writes go through the run store
(``app.store.runs``); with the other modules of ``app/store`` (effects, feedback, jtis, ahead,
leases, changes, analytics, retention) this is the only code that reads the tables.

Functions take a ``Session`` or, on the hook path, a ``Connection`` (plain statements: no unit
of work, no ORM objects) and leave the transaction to the caller. Rows come back as ORM objects
whose attributes stay readable after commit; routes map them to response models, never return
them as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Connection, Table, select
from sqlalchemy.orm import Session

from app.statuses import RunStatus
from app.store.models import (
    Run,
    SourceVersion,
    TraceEvent,
)

__all__ = [
    "could_be_run_id",
    "get_run",
    "hook_run",
    "list_runs",
    "list_sources",
    "list_trace",
    "lock_run",
    "run_input",
    "trace_payloads",
]


_RUNS = cast(Table, Run.__table__)
_TRACE = cast(Table, TraceEvent.__table__)
_SOURCES = cast(Table, SourceVersion.__table__)


def hook_run(
    connection: Connection, service_id: str, hook_instance: str
) -> Mapping[str, Any] | None:
    """The run of a hook call, if any: ``id``, ``status``, ``request_digest``, ``response``,
    ``lease_expires_at``."""
    found = (
        connection.execute(
            select(
                _RUNS.c.id,
                _RUNS.c.status,
                _RUNS.c.request_digest,
                _RUNS.c.response,
                _RUNS.c.lease_expires_at,
            ).where(_RUNS.c.service_id == service_id, _RUNS.c.hook_instance == hook_instance)
        )
        .mappings()
        .first()
    )
    return dict(found) if found is not None else None


def lock_run(connection: Connection, run_id: str) -> Mapping[str, Any] | None:
    """A run's columns, its row locked until the caller's transaction ends (PostgreSQL), or
    None (also for an id no run can have)."""
    if not could_be_run_id(run_id):
        return None
    statement = select(_RUNS).where(_RUNS.c.id == run_id).with_for_update()
    found = connection.execute(statement).mappings().first()
    return dict(found) if found is not None else None


def trace_payloads(connection: Connection, run_id: str) -> list[dict[str, Any]]:
    """A run's stored trace entries, in order."""
    rows = connection.execute(
        select(_TRACE.c.payload).where(_TRACE.c.run_id == run_id).order_by(_TRACE.c.seq)
    )
    return [dict(payload) for (payload,) in rows]


#: Longest run id stored (the ``runs.id`` column).
RUN_ID_LENGTH = 36


def could_be_run_id(run_id: str) -> bool:
    """Whether ``run_id`` could name a stored run: no longer than the column and free of
    characters a database cannot compare (a NUL fails the query on PostgreSQL)."""
    return 0 < len(run_id) <= RUN_ID_LENGTH and run_id.isprintable()


def get_run(session: Session, run_id: str, *, for_update: bool = False) -> Run | None:
    """The run, or None (also for an id no run can have, without asking the database).
    ``for_update`` locks the row until the transaction ends (PostgreSQL)."""
    if not could_be_run_id(run_id):
        return None
    return session.get(Run, run_id, with_for_update=for_update)


def run_input(session: Session, run_id: str) -> bytes | None:
    """A run's stored input (``runs.input``), without loading the rest of the row."""
    if not could_be_run_id(run_id):
        return None
    found = session.execute(select(Run.input).where(Run.id == run_id)).scalar_one_or_none()
    return bytes(found) if found is not None else None


def list_runs(
    session: Session,
    *,
    status: RunStatus | None = None,
    service_id: str | None = None,
    due_before: datetime | None = None,
    patient: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> list[Run]:
    """Runs, newest first; ``due_before`` selects runs whose wait deadline has passed,
    ``patient`` every run about that patient."""
    stmt = select(Run).order_by(Run.created_at.desc(), Run.id).limit(limit).offset(offset)
    if patient is not None:
        stmt = stmt.where(Run.patient == patient)
    if status is not None:
        stmt = stmt.where(Run.status == status)
    if service_id is not None:
        stmt = stmt.where(Run.service_id == service_id)
    if due_before is not None:
        stmt = stmt.where(Run.wait_deadline.is_not(None), Run.wait_deadline <= due_before)
    return list(session.execute(stmt).scalars())


def list_trace(session: Session, run_id: str) -> list[TraceEvent]:
    stmt = select(TraceEvent).where(TraceEvent.run_id == run_id).order_by(TraceEvent.seq)
    return list(session.execute(stmt).scalars())


def list_sources(session: Session, run_id: str) -> list[SourceVersion]:
    stmt = select(SourceVersion).where(SourceVersion.run_id == run_id).order_by(SourceVersion.id)
    return list(session.execute(stmt).scalars())
