"""Repository functions of runs: their rows, traces, source versions and issued cards. With the
other modules of ``app/store`` (effects, feedback, jtis, ahead, leases, changes, analytics,
retention) the only code that reads and writes the tables.

Every function takes a ``Session`` and leaves committing to the caller (``session_scope``), so a
route decides what one transaction covers. Rows come back as ORM objects whose attributes stay
readable after commit; routes map them to response models, never return them as they are.

The hook path's functions (``insert_run``, ``finish_run``, ``add_trace``, ``add_sources``,
``hook_run``) are plain statements on a ``Connection`` (``engine.begin()``): no unit of work, no
ORM objects, because a hook call pays for every statement's overhead on its answer's latency.
They too leave committing to the caller.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Connection, Table, bindparam, delete, func, insert, select, text, update
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session, make_transient_to_detached
from sqlalchemy.sql.expression import Executable

from app.errors import NotFound
from app.statuses import RUN_STATUSES, RunStatus
from app.store.db import dialect_insert, insert_for
from app.store.models import (
    IssuedCard,
    Run,
    SourceVersion,
    TraceEvent,
    new_id,
    utcnow,
)

__all__ = [
    "CardIssue",
    "add_run_rows",
    "add_sources",
    "add_trace",
    "claim_run",
    "could_be_run_id",
    "finish_run",
    "get_run",
    "hook_run",
    "insert_run",
    "list_runs",
    "list_sources",
    "list_trace",
    "lock_run",
    "record_cards",
    "replace_trace",
    "run_input",
    "save_outcome",
    "trace_payloads",
]


_RUNS = cast(Table, Run.__table__)
_TRACE = cast(Table, TraceEvent.__table__)
_SOURCES = cast(Table, SourceVersion.__table__)
_ISSUED_CARDS = cast(Table, IssuedCard.__table__)
_TABLES = {t.name: t for t in (_TRACE, _SOURCES, _ISSUED_CARDS)}


# --- runs ---------------------------------------------------------------------------------


def claim_run(
    session: Session,
    *,
    workflow_iri: str,
    workflow_version: str | None = None,
    ontology_digest: str | None = None,
    service_id: str | None = None,
    hook: str | None = None,
    hook_instance: str | None = None,
    request_digest: str | None = None,
    run_id: str | None = None,
    patient: str | None = None,
) -> tuple[Run, bool]:
    """Create the run for a hook call, or return the one that already exists for it.

    Returns ``(run, created)``. Two identical concurrent calls (same service and hookInstance)
    yield exactly one ``created=True``; the other caller gets the winner's row once the winner
    commits. Commit soon after (the claim is its own short transaction) so a retry by the
    EHR finds the claim while the workflow runs. The caller compares ``request_digest`` to
    detect a reused hookInstance with a different body. Runs without a hookInstance are
    always created.
    """
    values = {
        "id": run_id or new_id(),
        "service_id": service_id,
        "hook": hook,
        "hook_instance": hook_instance,
        "patient": patient,
        "workflow_iri": workflow_iri,
        "workflow_version": workflow_version,
        "ontology_digest": ontology_digest,
        "status": "running",
        "request_digest": request_digest,
        "created_at": utcnow(),
        "updated_at": utcnow(),
    }
    if service_id is None or hook_instance is None:
        run = Run(**values)
        session.add(run)
        session.flush()
        return run, True
    # One round trip for the winner: the row it inserted is exactly ``values``, so it is
    # attached to the session as persistent without reading it back.
    stmt = (
        dialect_insert(session, Run.__table__)
        .values(**values)
        .on_conflict_do_nothing(index_elements=["service_id", "hook_instance"])
        .returning(Run.__table__.c.id)
    )
    if session.execute(stmt).scalar_one_or_none() is not None:
        unset = dict.fromkeys(("terminal", "decision", "response", "outcome", "world_state"))
        run = Run(**values, **unset, position=None, wait_deadline=None)
        make_transient_to_detached(run)
        session.add(run)
        return run, True
    existing = session.execute(
        select(Run).where(Run.service_id == service_id, Run.hook_instance == hook_instance)
    ).scalar_one()
    return existing, False


def _source_row(run_id: str, source: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "resource_type": source["resource_type"],
        "resource_id": source["resource_id"] if "resource_id" in source else source["id"],
        "version_id": source.get("version_id"),
        "last_updated": source.get("last_updated"),
        "content_hash": source.get("content_hash"),
    }


def save_outcome(
    session: Session,
    run_id: str,
    *,
    status: RunStatus,
    terminal: str | None,
    decision: dict[str, Any] | None,
    outcome: dict[str, Any] | None,
    response: dict[str, Any] | None = None,
    trace: Sequence[Mapping[str, Any]] = (),
    sources: Iterable[Mapping[str, Any]] = (),
    world_state: dict[str, Any] | None = None,
    position: str | None = None,
    wait_deadline: datetime | None = None,
    first_seq: int | None = None,
) -> None:
    """Record how a run ended (or where it suspended) with its trace and source versions.

    ``trace`` entries are stored in order after any already recorded (a resumed run appends);
    each entry's ``step`` and ``kind`` keys are indexed, the whole entry is the payload.
    A caller that knows where the trace starts (``first_seq=0`` for a run it just claimed and
    that nothing else writes) saves the query for the last recorded entry; a wrong guess is
    refused by the unique ``(run_id, seq)`` key, never stored.
    ``sources`` are mappings with ``resource_type``, ``resource_id`` (or ``id``),
    ``version_id``, ``last_updated`` and ``content_hash``. Everything lands in the caller's
    transaction: either all of it is persisted or none.
    """
    if status not in RUN_STATUSES:
        raise ValueError(f"unknown run status {status!r}")
    connection = session.connection()
    found = finish_run(
        connection,
        run_id,
        status=status,
        terminal=terminal,
        decision=decision,
        outcome=outcome,
        response=response,
        world_state=world_state,
        position=position,
        wait_deadline=wait_deadline,
    )
    if not found:
        raise NotFound(where="run", message=f"no run {run_id}")
    loaded = session.identity_map.get(session.identity_key(Run, run_id))
    if loaded is not None:  # the session holds the row as it was: read it afresh when used
        session.expire(loaded)
    add_trace(connection, run_id, trace, first_seq=first_seq)
    add_sources(connection, run_id, sources)


# --- hook runs: plain statements on a Connection ----------------------------------------------


@functools.cache
def _run_insert(dialect: str) -> Executable:
    """INSERT … ON CONFLICT (service_id, hook_instance) DO NOTHING RETURNING id, built once: the
    columns come with the parameters (a statement built per call costs more than its round
    trip)."""
    return (
        insert_for(dialect, _RUNS)
        .on_conflict_do_nothing(index_elements=["service_id", "hook_instance"])
        .returning(_RUNS.c.id)
    )


_RUN_UPDATE = update(_RUNS).where(_RUNS.c.id == bindparam("b_run_id")).returning(_RUNS.c.id)


def insert_run(connection: Connection, values: Mapping[str, Any]) -> bool:
    """Insert a run row unless its ``(service_id, hook_instance)`` is taken; True when inserted.

    ``values`` are ``runs`` columns; ``id``, ``status``, ``created_at`` and ``updated_at`` are
    filled in when missing. On PostgreSQL a concurrent insert of the same key waits for the
    other transaction and then inserts nothing, so exactly one of any number of concurrent
    callers (in any process) gets True. A run without a hookInstance is always inserted. The
    caller compares ``request_digest`` of the existing row itself."""
    if values.get("status", "running") not in RUN_STATUSES:
        raise ValueError(f"unknown run status {values.get('status')!r}")
    now = utcnow()
    row = {"id": new_id(), "status": "running", "created_at": now, "updated_at": now, **values}
    statement = _run_insert(connection.dialect.name)
    return connection.execute(statement, row).scalar_one_or_none() is not None


_RUN_FENCED_UPDATE = (
    update(_RUNS)
    .where(
        _RUNS.c.id == bindparam("b_run_id"),
        _RUNS.c.lease_owner == bindparam("b_owner"),
        _RUNS.c.status == "running",
    )
    .returning(_RUNS.c.id)
)


def finish_run(
    connection: Connection, run_id: str, *, owner: str | None = None, **values: Any
) -> bool:
    """Set a run's columns (its outcome, or ``status="failed"``); False when there is no run.

    With ``owner`` the run must still be ``running`` under that lease (a fenced write): False
    when another call took it over meanwhile. The UPDATE locks the row until the caller's
    transaction ends."""
    if "status" in values and values["status"] not in RUN_STATUSES:
        raise ValueError(f"unknown run status {values['status']!r}")
    params = {**values, "updated_at": utcnow(), "b_run_id": run_id}
    if owner is None:
        return connection.execute(_RUN_UPDATE, params).scalar_one_or_none() is not None
    params["b_owner"] = owner
    return connection.execute(_RUN_FENCED_UPDATE, params).scalar_one_or_none() is not None


def add_trace(
    connection: Connection,
    run_id: str,
    trace: Sequence[Mapping[str, Any]],
    *,
    first_seq: int | None = None,
) -> None:
    """Append trace entries in order after any already recorded (``first_seq`` when known)."""
    if not trace:
        return
    start = first_seq
    if start is None:
        # read after the caller locked the run row, so concurrent appends cannot interleave
        last = connection.execute(
            select(func.max(_TRACE.c.seq)).where(_TRACE.c.run_id == run_id)
        ).scalar_one()
        start = 0 if last is None else last + 1
    _insert_many(connection, [(_TRACE, _trace_rows(run_id, trace, start))])


def _trace_rows(
    run_id: str, trace: Sequence[Mapping[str, Any]], start: int
) -> list[dict[str, Any]]:
    return [
        {
            "run_id": run_id,
            "seq": start + offset,
            "step": entry.get("step"),
            "kind": str(entry.get("kind") or "event"),
            "payload": dict(entry),
        }
        for offset, entry in enumerate(trace)
    ]


def add_sources(connection: Connection, run_id: str, sources: Iterable[Mapping[str, Any]]) -> None:
    """Record the FHIR resource versions a run read (see ``save_outcome`` for the keys)."""
    _insert_many(connection, [(_SOURCES, [_source_row(run_id, s) for s in sources])])


def add_run_rows(
    connection: Connection,
    run_id: str,
    *,
    trace: Sequence[Mapping[str, Any]],
    sources: Iterable[Mapping[str, Any]],
    service_id: str,
    cards: Iterable[CardIssue],
) -> None:
    """A new hook run's rows besides its own, in the caller's transaction: its trace (from
    ``seq`` 0: nothing else writes the trace of a run just inserted), the FHIR resource
    versions it read and the cards it returned (``add_trace``, ``add_sources`` and
    ``record_cards`` at once: one statement on PostgreSQL)."""
    _insert_many(
        connection,
        [
            (_TRACE, _trace_rows(run_id, trace, 0)),
            (_SOURCES, [_source_row(run_id, s) for s in sources]),
            (_ISSUED_CARDS, _card_rows(run_id, service_id, cards)),
        ],
    )


#: PostgreSQL types of the columns the hook path inserts many rows of at once.
_PG_TYPES = {
    "service_id": "text",
    "card_uuid": "text",
    "card_key": "text",
    "rules": "jsonb",
    "run_id": "text",
    "seq": "integer",
    "step": "text",
    "kind": "text",
    "payload": "jsonb",
    "resource_type": "text",
    "resource_id": "text",
    "version_id": "text",
    "last_updated": "text",
    "content_hash": "text",
}


@functools.cache
def _pg_insert_many(shapes: tuple[tuple[str, tuple[str, ...]], ...]) -> Executable:
    """One statement inserting into each ``(table, columns)`` the rows of its JSONB parameter
    ``rows_<i>`` (INSERT … SELECT FROM jsonb_to_recordset; all but the last as data-modifying
    WITH clauses, which PostgreSQL runs exactly once each), built once per shape."""
    parts = []
    for i, (table, columns) in enumerate(shapes):
        names = ", ".join(columns)
        record = ", ".join(f"{c} {_PG_TYPES[c]}" for c in columns)
        parts.append(
            f"INSERT INTO {table} ({names}) SELECT {names} "
            f"FROM jsonb_to_recordset(:rows_{i}) AS r({record})"
        )
    *first, last = parts
    ctes = ", ".join(f"w{i} AS ({part})" for i, part in enumerate(first))
    return text(f"WITH {ctes} {last}" if ctes else last).bindparams(
        *(bindparam(f"rows_{i}", type_=postgresql.JSONB) for i in range(len(parts)))
    )


@functools.cache
def _plain_insert(table: str) -> Executable:
    return insert(_TABLES[table])


def _insert_many(connection: Connection, batches: list[tuple[Table, list[dict[str, Any]]]]) -> None:
    """Insert each batch's rows (dicts with the same keys) in the caller's transaction. On
    PostgreSQL all of them travel in one statement, each table's rows as one JSON parameter:
    an executemany per table (a trace's 5 rows, a call's 10 source versions, its cards) cost
    more CPU than the rest of the run's store, in psycopg's pipeline per row and in the server
    a bind and execute per row, besides a round trip per table. SQLite's executemany is a loop
    in C: there each table keeps its own."""
    batches = [(table, rows) for table, rows in batches if rows]
    if not batches:
        return
    if connection.dialect.name != "postgresql":
        for table, rows in batches:
            connection.execute(_plain_insert(table.name), rows)
        return
    shapes = tuple((table.name, tuple(rows[0])) for table, rows in batches)
    params = {f"rows_{i}": rows for i, (_table, rows) in enumerate(batches)}
    connection.execute(_pg_insert_many(shapes), params)


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


def replace_trace(
    connection: Connection, run_id: str, entries: Sequence[Mapping[str, Any]], *, from_seq: int
) -> None:
    """Rewrite a run's trace from entry ``from_seq`` on (a resumed run continues its last
    entries and appends new ones); the caller holds the run's row lock."""
    connection.execute(delete(_TRACE).where(_TRACE.c.run_id == run_id, _TRACE.c.seq >= from_seq))
    add_trace(connection, run_id, entries, first_seq=from_seq)


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


# --- issued cards -------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class CardIssue:
    """A card a hook run returned: its uuid, the declaration it came from (its summary
    template; None for a card no declaration made) and the rules of the decision's proof."""

    uuid: str
    key: str | None = None
    rules: tuple[str, ...] = ()


def record_cards(
    session: Session | Connection, *, run_id: str, service_id: str, cards: Iterable[CardIssue]
) -> None:
    """Remember the cards a hook run returned, so feedback can find them by key (in the
    caller's transaction: the hook path passes its ``Connection``)."""
    rows = _card_rows(run_id, service_id, cards)
    if rows:
        session.execute(_plain_insert(_ISSUED_CARDS.name), rows)


def _card_rows(run_id: str, service_id: str, cards: Iterable[CardIssue]) -> list[dict[str, Any]]:
    unique = {c.uuid: c for c in cards}
    return [
        {
            "run_id": run_id,
            "service_id": service_id,
            "card_uuid": c.uuid,
            "card_key": c.key[:500] if c.key else None,
            "rules": list(c.rules),
        }
        for c in unique.values()
    ]
