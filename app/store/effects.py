"""The effect log: every adapter-mediated write's fate, persisted and read back on its own.

Each state write is one statement in one short transaction (:class:`EffectLog`), committed at
once and holding no lock across a network call; :func:`effect_reports` reads a run's effects
back for ``GET /runs/{id}``, the cards and the CLI. This module is the only code that writes the
``effects`` table (:mod:`app.cds.write_notices` says in a sentence what became of a write).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Connection, Engine, Table, literal_column, select, update
from sqlalchemy.orm import Session
from sqlalchemy.sql.expression import Executable

from app.store.db import insert_for, session_scope
from app.store.models import Effect, EffectState, utcnow

__all__ = [
    "SENT_STATES",
    "SETTLED",
    "EffectLog",
    "EffectRow",
    "EffectState",
    "effect_json",
    "effect_reports",
    "insert_unsent",
    "list_effects",
]

#: States after which nothing more happens to an effect.
SETTLED: frozenset[str] = frozenset({"accepted", "conflicted", "failed", "refused"})

#: States that say a request went out (or may have): a later write that sent nothing must not
#: overwrite them, or an effect that needs reconciling would be lost.
_SENT: tuple[str, ...] = ("attempted", "accepted", "conflicted", "unknown")
#: The same, public: a run taken over from a dead process does not send these writes again.
SENT_STATES = frozenset(_SENT)
_EFFECTS = cast(Table, Effect.__table__)


@dataclass(frozen=True, kw_only=True)
class EffectRow:
    """What identifies one effect in the ``effects`` table."""

    run_id: str
    effect_id: str
    tool: str
    target: str
    expected: str | None


@functools.cache
def _effect_upsert(dialect: str, sent: bool) -> Executable:
    """The upsert of one effect row, built once per backend (values come as parameters).

    A write that was sent counts one more attempt; one that sent nothing never hides an earlier
    sent attempt (the row keeps its state and the statement returns no row)."""
    table = _EFFECTS
    insert = insert_for(dialect, table)
    changes: dict[str, Any] = {
        name: insert.excluded[name]
        for name in ("state", "remote_response", "target_reference", "expected_version")
    }
    changes["updated_at"] = insert.excluded.updated_at
    if sent:
        changes["attempts"] = table.c.attempts + 1
    sent_states: list[Any] = [literal_column(f"'{s}'") for s in _SENT]  # this module's constants
    return insert.on_conflict_do_update(
        index_elements=["run_id", "effect_id"],
        set_=changes,
        where=None if sent else table.c.state.not_in(sent_states),
    ).returning(table.c.attempts)


def _effect_params(
    row: EffectRow, state: EffectState, response: dict[str, Any], sent: bool
) -> dict[str, Any]:
    now = utcnow()
    return {
        "run_id": row.run_id,
        "effect_id": row.effect_id,
        "tool": row.tool,
        "target_reference": row.target,
        "expected_version": row.expected,
        "state": state,
        "attempts": 1 if sent else 0,
        "remote_response": response,
        "created_at": now,
        "updated_at": now,
    }


class EffectLog:
    """Persists effects. Every write is one statement in one short transaction, committed at once
    (so it survives a crash) and holding no lock across a network call.

    It also remembers, per effect, the state it last committed (``persisted``), in the shape
    ``effect_reports`` reads back: what the log wrote is what the run's cards report, without a
    second transaction to read it. A write whose statement changed no row (an unsent retry that
    must not hide a sent attempt) leaves the memory as it is, as it leaves the row.

    With ``ensure_run`` the run's row may not exist yet (a hook call claims its run only when
    something is about to leave, :mod:`app.cds.claim`): a write that sends nothing then waits
    for the run's own transaction (:meth:`write_pending`), which stores it together with the
    outcome, or the answer is not given at all; and before a request leaves, ``ensure_run``
    commits the run's row (it raises, and nothing is sent, when another call holds the run),
    then what was waiting is written, then the ``attempted`` row."""

    def __init__(self, engine: Engine, *, ensure_run: Callable[[], None] | None = None) -> None:
        self.engine = engine
        self._ensure_run = ensure_run
        self._run_exists = ensure_run is None
        self._lock = threading.Lock()
        self._persisted: dict[str, dict[str, Any]] = {}  # effect id → effect_json shape
        #: unsent writes waiting for the run's row, by effect id: (row, state, response)
        self._pending: dict[str, tuple[EffectRow, EffectState, dict[str, Any]]] = {}

    def persisted(self) -> list[dict[str, Any]]:
        """Every effect this log committed, in the order first written, as ``effect_reports``
        would read it back (only this log's writes: one hook call's run)."""
        with self._lock:
            return [dict(e) for e in self._persisted.values()]

    def _remember(
        self,
        effect_id: str,
        *,
        state: EffectState,
        response: dict[str, Any],
        row: EffectRow | None = None,
        attempts: int | None = None,
    ) -> None:
        with self._lock:
            known = self._persisted.get(effect_id)
            if row is not None:
                target, expected, tool = row.target, row.expected, row.tool
            elif known is not None:
                target, expected, tool = known["target"], known["expectedVersion"], known["tool"]
            else:  # an effect another log wrote: nothing of it is known here
                return
            if attempts is None:
                attempts = int(known["attempts"]) if known is not None else 0
            self._persisted[effect_id] = _effect_entry(
                effect_id=effect_id,
                tool=tool,
                target=target,
                expected=expected,
                state=state,
                response=response,
                attempts=attempts,
            )

    def _execute(self, statement: Executable) -> int:
        with self.engine.begin() as connection:
            return int(getattr(connection.execute(statement), "rowcount", 0))

    def _upsert(
        self, row: EffectRow, *, state: EffectState, response: dict[str, Any], sent: bool
    ) -> None:
        statement = _effect_upsert(self.engine.dialect.name, sent)
        with self.engine.begin() as connection:
            attempts = connection.execute(
                statement, _effect_params(row, state, response, sent)
            ).scalar_one_or_none()
        if attempts is not None:  # None: the row kept its sent state, and so does the memory
            self._remember(
                row.effect_id, state=state, response=response, row=row, attempts=attempts
            )

    def _claim_run(self) -> None:
        """Make sure the run's row is committed before a request leaves (see the class)."""
        if self._ensure_run is None:
            return
        self._ensure_run()  # before every request: the claim, then the lease's fence
        if self._run_exists:
            return
        self._run_exists = True
        if self._pending:
            with self.engine.begin() as connection:
                self.write_pending(connection)
            self._pending.clear()

    def write_pending(self, connection: Connection) -> None:
        """Write the unsent effects that wait for the run's row, in the caller's transaction
        (once the run's row is committed)."""
        statement = _effect_upsert(connection.dialect.name, False)
        for row, state, response in list(self._pending.values()):
            connection.execute(statement, _effect_params(row, state, response, False))

    def pending(self) -> list[dict[str, Any]]:
        """The unsent effects that wait for the run's row, as ``effects`` columns without the
        run and times: the run store inserts them with the run (:func:`insert_unsent`).
        Nothing was sent for them, so nothing else can have written their rows."""
        return [
            {
                "effect_id": row.effect_id,
                "tool": row.tool,
                "target_reference": row.target,
                "expected_version": row.expected,
                "state": state,
                "attempts": 0,
                "remote_response": response,
            }
            for row, state, response in list(self._pending.values())
        ]

    def attempt(self, row: EffectRow, response: dict[str, Any]) -> None:
        """Record the effect ``attempted`` (one more attempt): call before the request leaves."""
        self._claim_run()
        self._upsert(row, state="attempted", response=response, sent=True)

    def adopt(self, row: EffectRow, effect: Mapping[str, Any]) -> None:
        """Report an effect logged before a takeover (``effect_json`` shape) as this run's,
        unchanged: nothing is written, the cards say what it is."""
        response: dict[str, Any] = {
            "status": effect.get("status"),
            "newVersion": effect.get("newVersion"),
            "created": effect.get("created"),
        }
        if effect.get("detail"):
            response["reason"] = effect["detail"]
        response["change"] = {
            key: effect.get(key)
            for key in ("resourceType", "element", "value", "operation", "identifier", "recipients")
        }
        self._remember(
            row.effect_id,
            state=cast(EffectState, effect["state"]),
            response=response,
            row=row,
            attempts=int(effect.get("attempts") or 0),
        )

    def unsent(self, row: EffectRow, state: EffectState, response: dict[str, Any]) -> None:
        """Record an effect for which no write was sent, directly in its final ``state``."""
        if not self._run_exists:  # the run's own transaction will store it (see the class)
            self._pending[row.effect_id] = (row, state, response)
            self._remember(row.effect_id, state=state, response=response, row=row, attempts=0)
            return
        self._upsert(row, state=state, response=response, sent=False)

    def set(
        self, run_id: str, effect_id: str, state: EffectState, response: dict[str, Any]
    ) -> None:
        """Move a recorded effect to ``state`` (the answer to its request, or reconciliation)."""
        table = _EFFECTS
        done = self._execute(
            update(table)
            .where(table.c.run_id == run_id, table.c.effect_id == effect_id)
            .values(state=state, remote_response=response, updated_at=utcnow())
        )
        if done != 1:
            raise LookupError(f"no effect {effect_id} in run {run_id}")
        self._remember(effect_id, state=state, response=response)


def insert_unsent(
    connection: Connection, run_id: str, effects: Sequence[Mapping[str, Any]]
) -> None:
    """Insert the unsent effects (:meth:`EffectLog.pending`) of a run just inserted."""
    if effects:
        now = utcnow()
        rows = [{**e, "run_id": run_id, "created_at": now, "updated_at": now} for e in effects]
        connection.execute(_EFFECTS.insert(), rows)


def effect_reports(engine: Engine, run_id: str) -> list[dict[str, Any]]:
    """Every effect of a run as persisted (for cards, ``GET /runs/{id}`` and the CLI)."""
    with session_scope(engine) as session:
        rows = list_effects(session, run_id=run_id)
        return [effect_json(row) for row in rows]


def effect_json(row: Any) -> dict[str, Any]:
    """One persisted effect as JSON."""
    return _effect_entry(
        effect_id=row.effect_id,
        tool=row.tool,
        target=row.target_reference,
        expected=row.expected_version,
        state=row.state,
        response=row.remote_response or {},
        attempts=row.attempts,
    )


def _effect_entry(
    *,
    effect_id: str,
    tool: str,
    target: str,
    expected: str | None,
    state: str,
    response: Mapping[str, Any],
    attempts: int,
) -> dict[str, Any]:
    """An effect as JSON from its ``effects`` columns (``remote_response`` as ``response``)."""
    change = response.get("change") or {}
    return {
        "effectId": effect_id,
        "tool": tool,
        "target": target,
        "expectedVersion": expected,
        "resourceType": change.get("resourceType"),
        "element": change.get("element"),
        "value": change.get("value"),
        "state": state,
        "status": response.get("status"),
        "newVersion": response.get("newVersion"),
        "detail": response.get("reason") or response.get("error"),
        "attempts": attempts,
        "operation": change.get("operation") or "update",
        # a create: the identifier it carries, what it made, and whom the resource addresses
        "identifier": change.get("identifier"),
        "created": response.get("created"),
        "recipients": change.get("recipients"),
    }


def list_effects(
    session: Session,
    *,
    state: EffectState | Sequence[EffectState] | None = None,
    run_id: str | None = None,
) -> list[Effect]:
    """Effects in creation order, optionally only those in the given state(s) or run."""
    stmt = select(Effect).order_by(Effect.id)
    if isinstance(state, str):
        stmt = stmt.where(Effect.state == state)
    elif state is not None:
        stmt = stmt.where(Effect.state.in_(list(state)))
    if run_id is not None:
        stmt = stmt.where(Effect.run_id == run_id)
    return list(session.execute(stmt).scalars())
