"""The run store: the only code that writes the ``runs`` table and a run's own rows (its trace,
source versions and issued cards), one method per transition of a run.

A run's life, as the store sees it:

- **recorded** (:meth:`RunStore.record`): a hook run that sent nothing outside is inserted once,
  complete — its row, trace, source versions, cards and the effects of writes that sent
  nothing — under the condition that its deployment is still at the version it ran on. On
  PostgreSQL that is **one statement** (data-modifying ``WITH`` clauses, the version check as
  the INSERT's condition) on the store's own connections (``app.store.db.RunConnections``),
  prepared once per connection and sent without a pre-ping: one round trip, no
  ``BEGIN``/``COMMIT``. SQLite does the same in one transaction.
- **claimed** (:meth:`RunStore.claim`): a run about to send something commits its row as
  ``running`` first, so a twin waits for its answer (``app.cds.claim``);
- **finished** (:meth:`RunStore.finish`): a claimed run's outcome, fenced by its lease; a
  failure (:meth:`RunStore.fail`);
- **taken over** (:meth:`RunStore.take_over`, :meth:`RunStore.renew`): leases of claimed runs;
  **ended abandoned** (:meth:`RunStore.end_abandoned`);
- **resumed** (:meth:`RunStore.resume`): a suspended run's new outcome and trace;
- **reused** (:meth:`RunStore.reuse`): an order-sign call answered by a run computed ahead;
- **saved** (:meth:`RunStore.save`): a run on structured input (the run routes, the CLI);
- **purged** (:meth:`RunStore.purge`): retention.

Methods that take a ``Connection`` or ``Session`` join the caller's transaction.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    Connection,
    Engine,
    String,
    Table,
    Text,
    bindparam,
    delete,
    func,
    insert,
    literal_column,
    or_,
    select,
    text,
    update,
)
from sqlalchemy import cast as sql_cast
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session
from sqlalchemy.sql.expression import Executable

from app.fast_json import dumps_text
from app.statuses import RUN_STATUSES
from app.store.changes import deployment_generation
from app.store.db import close_run_connections, insert_for, run_connections
from app.store.effects import insert_unsent
from app.store.models import IssuedCard, Run, SourceVersion, TraceEvent, new_id, utcnow
from app.store.run_rows import CardIssue, NewRun, Recorded, RunColumns, source_row

__all__ = ["RunStore"]


def _card_rows(cards: Iterable[CardIssue]) -> list[dict[str, Any]]:
    unique = {c.uuid: c for c in cards}
    return [
        {"card_uuid": c.uuid, "card_key": c.key[:500] if c.key else None, "rules": list(c.rules)}
        for c in unique.values()
    ]


def _checked(status: object) -> None:
    if status not in RUN_STATUSES:
        raise ValueError(f"unknown run status {status!r}")


_RUNS = cast(Table, Run.__table__)
_TRACE = cast(Table, TraceEvent.__table__)
_SOURCES = cast(Table, SourceVersion.__table__)
_ISSUED = cast(Table, IssuedCard.__table__)


@functools.cache
def _run_insert(dialect: str) -> Executable:
    """INSERT … ON CONFLICT (service_id, hook_instance) DO NOTHING RETURNING id, built once."""
    return (
        insert_for(dialect, _RUNS)
        .on_conflict_do_nothing(index_elements=["service_id", "hook_instance"])
        .returning(_RUNS.c.id)
    )


_UPDATE = update(_RUNS).where(_RUNS.c.id == bindparam("b_run_id")).returning(_RUNS.c.id)
_FENCED_UPDATE = (
    update(_RUNS)
    .where(
        _RUNS.c.id == bindparam("b_run_id"),
        _RUNS.c.lease_owner == bindparam("b_owner"),
        _RUNS.c.status == "running",
    )
    .returning(_RUNS.c.id)
)


@dataclass(frozen=True)
class RunStore:
    """The run store of one database (see the module); cheap to make, :meth:`of` an engine.
    Its PostgreSQL connections (``app.store.db.run_connections``) live as long as the engine,
    or until :meth:`close`."""

    engine: Engine

    @classmethod
    def of(cls, engine: Engine) -> RunStore:
        return cls(engine)

    @property
    def one_statement(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    def close(self) -> None:
        """Close the engine's run store connections, if any were opened."""
        close_run_connections(self.engine)

    # --- recorded: a run that sent nothing, complete, at once ---------------------------

    def record(self, run: NewRun, *, deployment: str | None, generation: int) -> Recorded:
        """Insert ``run`` complete unless ``deployment``'s generation is no longer
        ``generation`` (None: no deployment to check) or a twin holds its hookInstance; in
        its own transaction (one statement on PostgreSQL)."""
        columns = _with_defaults(run.columns)
        _checked(columns["status"])
        if self.one_statement:
            return self._record_pg(run, columns, deployment, generation)
        with self.engine.begin() as connection:
            found = deployment_generation(connection, deployment) if deployment else (0, None)
            if found[0] != generation:
                return Recorded(found[0], found[1], False)
            if not self.claim(connection, columns):
                return Recorded(found[0], found[1], False)
            self.add_rows(connection, columns["id"], run)
        return Recorded(found[0], found[1], True)

    def _record_pg(
        self, run: NewRun, columns: RunColumns, deployment: str | None, generation: int
    ) -> Recorded:
        params = _pg_params(columns)
        params.update(
            b_deployment=deployment,
            b_generation=generation,
            b_trace=dumps_text(list(run.trace)),
            b_sources=dumps_text([source_row(s) for s in run.sources]),
            b_cards=dumps_text(_card_rows(run.cards)),
            b_effects=dumps_text(list(run.effects)),
        )
        row, again = run_connections(self.engine).fetchone(_PG_RECORD, params)
        assert row is not None
        stored = row[2] is not None
        if not stored and again:  # the first attempt may have committed before it died
            with self.engine.connect() as connection:
                found = select(_RUNS.c.id).where(_RUNS.c.id == columns["id"])
                stored = connection.execute(found).first() is not None
        return Recorded(int(row[0]), row[1], stored)

    def add_rows(self, connection: Connection, run_id: str, run: NewRun) -> None:
        """A new run's trace, source versions, cards and unsent effects, in the caller's
        transaction (nothing else wrote them: the trace starts at 0)."""
        self.add_trace(connection, run_id, run.trace, first_seq=0)
        sources = [{"run_id": run_id, **source_row(s)} for s in run.sources]
        if sources:
            connection.execute(insert(_SOURCES), sources)
        self.add_cards(connection, run_id, str(run.columns.get("service_id")), run.cards)
        insert_unsent(connection, run_id, run.effects)

    # --- claimed, finished, failed -------------------------------------------------------

    def claim(self, connection: Connection, columns: RunColumns) -> bool:
        """Insert a run row unless its ``(service_id, hook_instance)`` is taken; True when
        inserted. On PostgreSQL a concurrent insert of the same key waits for the other
        transaction and then inserts nothing, so exactly one caller (in any process) gets
        True. A run without a hookInstance is always inserted."""
        row = _with_defaults(columns)
        _checked(row["status"])
        statement = _run_insert(connection.dialect.name)
        return connection.execute(statement, dict(row)).scalar_one_or_none() is not None

    def finish(
        self, connection: Connection, run_id: str, columns: RunColumns, *, owner: str | None
    ) -> bool:
        """Set a run's columns (its outcome, or ``failed``); False when there is no run. With
        ``owner`` the run must still be ``running`` under that lease (a fenced write): False
        when another call took it over. The row stays locked until the transaction ends."""
        if "status" in columns:
            _checked(columns["status"])
        params: dict[str, Any] = {**columns, "updated_at": utcnow(), "b_run_id": run_id}
        if owner is None:
            return connection.execute(_UPDATE, params).scalar_one_or_none() is not None
        params["b_owner"] = owner
        return connection.execute(_FENCED_UPDATE, params).scalar_one_or_none() is not None

    def fail(self, connection: Connection, run_id: str, *, owner: str | None) -> bool:
        """Record a run ``failed`` (no terminal, no decision); fenced like :meth:`finish`."""
        failed: RunColumns = {"status": "failed", "terminal": None, "decision": None}
        if owner is not None:
            failed["lease_expires_at"] = None
        return self.finish(connection, run_id, failed, owner=owner)

    # --- leases ----------------------------------------------------------------------------

    def renew(self, connection: Connection, owners: Sequence[str], until: datetime) -> set[str]:
        """Extend the leases of running runs held by ``owners``; the owners renewed."""
        if not owners:
            return set()
        renewed = connection.execute(
            update(_RUNS)
            .where(_RUNS.c.lease_owner.in_(list(owners)), _RUNS.c.status == "running")
            .values(lease_expires_at=until)
            .returning(_RUNS.c.lease_owner)
        ).scalars()
        return {str(owner) for owner in renewed}

    def take_over(
        self, connection: Connection, run_id: str, *, owner: str, until: datetime, now: datetime
    ) -> bool:
        """Take a ``running`` run whose lease has expired (or that has none) for ``owner``;
        True for the one caller that gets it, however many try at once."""
        taken = connection.execute(
            update(_RUNS)
            .where(
                _RUNS.c.id == run_id,
                _RUNS.c.status == "running",
                or_(_RUNS.c.lease_expires_at.is_(None), _RUNS.c.lease_expires_at < now),
            )
            .values(lease_owner=owner, lease_expires_at=until, updated_at=now)
            .returning(_RUNS.c.id)
        ).scalar_one_or_none()
        return taken is not None

    def end_abandoned(self, connection: Connection, run_id: str, *, now: datetime) -> bool:
        """End as ``failed`` a run whose holder's lease expired, its trace saying why; False
        when another process took it first."""
        owner = f"sweeper-{new_id().replace('-', '')[:24]}"
        if not self.take_over(connection, run_id, owner=owner, until=now, now=now):
            return False
        reason = (
            "the process running it stopped and no retry of its hook call took it over; "
            "ended as failed"
        )
        entry = {"step": None, "kind": "abandoned", "at": now.isoformat(), "reason": reason}
        self.add_trace(connection, run_id, [entry])
        return self.fail(connection, run_id, owner=owner)

    # --- resumed, saved, reused, purged ------------------------------------------------------

    def resume(
        self,
        connection: Connection,
        run_id: str,
        columns: RunColumns,
        entries: Sequence[Mapping[str, Any]],
        *,
        from_seq: int,
    ) -> None:
        """A resumed run's new outcome, and its trace rewritten from entry ``from_seq`` on (it
        continues its last entries and appends new ones); the caller holds the row lock."""
        self.finish(connection, run_id, columns, owner=None)
        connection.execute(
            delete(_TRACE).where(_TRACE.c.run_id == run_id, _TRACE.c.seq >= from_seq)
        )
        self.add_trace(connection, run_id, entries, first_seq=from_seq)

    def save(
        self, connection: Connection, columns: RunColumns, trace: Sequence[Mapping[str, Any]]
    ) -> None:
        """A run on structured input, complete, in the caller's transaction."""
        row = _with_defaults(columns)
        self.claim(connection, row)
        self.add_trace(connection, row["id"], trace, first_seq=0)

    def reuse(
        self,
        connection: Connection,
        *,
        reused: str,
        columns: RunColumns,
        cards: Iterable[CardIssue],
    ) -> bool:
        """Store run ``columns`` (``id``, ``service_id``, ``hook_instance``,
        ``request_digest``, ``response``) as a copy of the run ``reused`` computed ahead,
        with its trace and source versions and the cards it answers with; False (nothing
        stored) when its ``(service, hookInstance)`` is taken."""
        params = {
            "id": columns["id"],
            "hook_instance": columns.get("hook_instance"),
            "request_digest": columns.get("request_digest"),
            "response": columns.get("response"),
            "old": reused,  # reused_run_id
            "created_at": utcnow(),
        }
        if connection.execute(_copy_run(connection.dialect.name), params).first() is None:
            return False
        copies = {"new": columns["id"], "old": reused}
        connection.execute(_COPY_TRACE, copies)
        connection.execute(_COPY_SOURCES, copies)
        self.add_cards(connection, columns["id"], str(columns.get("service_id")), cards)
        return True

    def purge(self, session: Session, ids: Sequence[str]) -> int:
        """Delete the runs ``ids`` (their children deleted first by the caller); how many."""
        statement = delete(Run).where(Run.id.in_(list(ids)))
        result = session.execute(statement.execution_options(synchronize_session=False))
        return int(getattr(result, "rowcount", 0) or 0)

    # --- a run's own rows ----------------------------------------------------------------

    def add_trace(
        self,
        connection: Connection,
        run_id: str,
        trace: Sequence[Mapping[str, Any]],
        *,
        first_seq: int | None = None,
    ) -> None:
        """Append trace entries in order after any already recorded (``first_seq`` when
        known; else read after the caller locked the run's row)."""
        if not trace:
            return
        start = first_seq
        if start is None:
            last = connection.execute(
                select(func.max(_TRACE.c.seq)).where(_TRACE.c.run_id == run_id)
            ).scalar_one()
            start = 0 if last is None else last + 1
        rows = [
            {
                "run_id": run_id,
                "seq": start + offset,
                "step": entry.get("step"),
                "kind": str(entry.get("kind") or "event"),
                "payload": dict(entry),
            }
            for offset, entry in enumerate(trace)
        ]
        connection.execute(insert(_TRACE), rows)

    def add_sources(
        self, connection: Connection, run_id: str, sources: Iterable[Mapping[str, Any]]
    ) -> None:
        """Record the FHIR resource versions a run read."""
        rows = [{"run_id": run_id, **source_row(s)} for s in sources]
        if rows:
            connection.execute(insert(_SOURCES), rows)

    def add_cards(
        self,
        connection: Connection | Session,
        run_id: str,
        service_id: str,
        cards: Iterable[CardIssue],
    ) -> None:
        """Remember the cards a hook run returned, so feedback finds them by key."""
        rows = [{"run_id": run_id, "service_id": service_id, **r} for r in _card_rows(cards)]
        if rows:
            connection.execute(insert(_ISSUED), rows)


# --- the statements ---------------------------------------------------------------------------

#: PostgreSQL's cast of each ``runs`` column's parameter in the one-statement record (text for
#: strings: an explicit cast to VARCHAR(n) would cut a long value, an assignment refuses it)
_PG_DIALECT: Any = postgresql.dialect()  # type: ignore[no-untyped-call]
_PG_CASTS = {
    c.name: (
        "text"
        if isinstance(c.type, String) and not isinstance(c.type, Text)
        else c.type.compile(dialect=_PG_DIALECT).lower()
    )
    for c in _RUNS.c
}
_PG_COLUMNS = tuple(_PG_CASTS)


def _pg_params(columns: RunColumns) -> dict[str, Any]:
    """The one-statement record's parameters for the run's columns (JSON ones encoded)."""
    params: dict[str, Any] = dict.fromkeys(_PG_COLUMNS)
    for name, value in columns.items():
        cast_to = _PG_CASTS[name]
        params[name] = dumps_text(value) if cast_to in _JSON_TYPES and value is not None else value
    return params


_JSON_TYPES = frozenset({"json", "jsonb"})
_EFFECT_RECORD = (
    "effect_id text, tool text, target_reference text, expected_version text, state text, "
    "attempts integer, remote_response jsonb"
)
_SOURCE_RECORD = (
    "resource_type text, resource_id text, version_id text, last_updated text, content_hash text"
)

#: The record of a new run on PostgreSQL, in one statement: the deployment's generation read
#: and checked (the run is inserted only from a row that exists when it matches), the run's
#: row (nothing when its hookInstance is taken), and its trace, source versions, cards and
#: unsent effects (only from the run inserted). Answers the generation, the shadow change and
#: the id of the run inserted (NULL: nothing was stored).
_PG_RECORD = (
    "WITH state AS (SELECT generation, shadow_change_id FROM deployment_state "
    "WHERE deployment = %(b_deployment)s), "
    "allowed AS (SELECT WHERE coalesce((SELECT generation FROM state), 0) = %(b_generation)s), "
    f"run AS (INSERT INTO runs ({', '.join(_PG_COLUMNS)}) "
    f"SELECT {', '.join(f'%({c})s::{_PG_CASTS[c]}' for c in _PG_COLUMNS)} FROM allowed "
    "ON CONFLICT (service_id, hook_instance) DO NOTHING RETURNING id), "
    "trace AS (INSERT INTO trace_events (run_id, seq, step, kind, payload) "
    "SELECT run.id, e.ord - 1, e.p->>'step', coalesce(nullif(e.p->>'kind', ''), 'event'), e.p "
    "FROM run, jsonb_array_elements(%(b_trace)s::jsonb) WITH ORDINALITY AS e(p, ord)), "
    "sources AS (INSERT INTO source_versions "
    "(run_id, resource_type, resource_id, version_id, last_updated, content_hash) "
    "SELECT run.id, r.* FROM run, "
    f"jsonb_to_recordset(%(b_sources)s::jsonb) AS r({_SOURCE_RECORD})), "
    "cards AS (INSERT INTO issued_cards (run_id, service_id, card_uuid, card_key, rules) "
    "SELECT run.id, %(service_id)s::text, r.card_uuid, r.card_key, r.rules FROM run, "
    "jsonb_to_recordset(%(b_cards)s::jsonb) AS r(card_uuid text, card_key text, rules jsonb)), "
    "effects AS (INSERT INTO effects (run_id, effect_id, tool, target_reference, "
    "expected_version, state, attempts, remote_response, created_at, updated_at) "
    "SELECT run.id, r.*, %(created_at)s::timestamptz, %(created_at)s::timestamptz FROM run, "
    f"jsonb_to_recordset(%(b_effects)s::jsonb) AS r({_EFFECT_RECORD})) "
    "SELECT coalesce((SELECT generation FROM state), 0), "
    "(SELECT shadow_change_id FROM state), (SELECT id FROM run)"
)

#: What a reused run takes from the run it reuses as it is (its own id, hookInstance, request,
#: answer and times are its own; a run answered ahead never waits, so it has no wait state).
_COPIED = (
    "service_id",
    "hook",
    "patient",
    "workflow_iri",
    "workflow_version",
    "deployment",
    "deployment_version",
    "deployment_imports",
    "ontology_digest",
    "status",
    "terminal",
    "decision",
    "input",
    "inputs",
)
_OWN = ("id", "hook_instance", "request_digest", "response", "reused_run_id", "created_at")

# the trace and the source versions are copied inside the database: nothing to decode
_COPY_TRACE = text(
    "INSERT INTO trace_events (run_id, seq, step, kind, payload) "
    "SELECT :new, seq, step, kind, payload FROM trace_events WHERE run_id = :old ORDER BY seq"
)
_COPY_SOURCES = text(
    "INSERT INTO source_versions "
    "(run_id, resource_type, resource_id, version_id, last_updated, content_hash) "
    "SELECT :new, resource_type, resource_id, version_id, last_updated, content_hash "
    "FROM source_versions WHERE run_id = :old ORDER BY id"
)


@functools.cache
def _copy_run(dialect: str) -> Executable:
    """INSERT INTO runs … SELECT from the run reused: its columns as they are, its outcome with
    its own id for the reused run's, this call's own columns from parameters; nothing when the
    ``(service, hookInstance)`` is taken. Built once per dialect."""
    new = bindparam("id", type_=String)
    if dialect == "postgresql":
        as_json = func.to_jsonb(sql_cast(new, Text))
        outcome: Any = func.jsonb_set(
            func.jsonb_set(_RUNS.c.outcome, literal_column("'{runId}'"), as_json),
            literal_column("'{replay,runId}'"),
            as_json,
        )
    else:
        outcome = func.json_set(_RUNS.c.outcome, "$.runId", new, "$.replay.runId", new)
    own = [
        new,
        bindparam("hook_instance", type_=String),
        bindparam("request_digest", type_=String),
        bindparam("response", type_=_RUNS.c.response.type),
        bindparam("old", type_=String),
        bindparam("created_at", type_=_RUNS.c.created_at.type),
    ]
    source = select(*own, *(_RUNS.c[n] for n in _COPIED), outcome).where(
        _RUNS.c.id == bindparam("old", type_=String)
    )
    statement: Executable = (
        insert_for(dialect, _RUNS)
        .from_select([*_OWN, *_COPIED, "outcome"], source)
        .on_conflict_do_nothing(index_elements=["service_id", "hook_instance"])
        .returning(_RUNS.c.id)
    )
    return statement


def _with_defaults(columns: RunColumns) -> RunColumns:
    now = utcnow()
    row: RunColumns = {"id": new_id(), "status": "running", "created_at": now, "updated_at": now}
    row.update(columns)
    return row
