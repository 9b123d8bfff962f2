"""Repository functions of change control: changes, their events, the active version of each
deployment, shadow results.

Like :mod:`app.store.repo`, every function leaves committing to the caller. The one on the hook
path (:func:`deployment_generation`) is a plain statement on the hook's own ``Connection``,
built once; the rest use a ``Session``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Connection, Table, bindparam, select
from sqlalchemy.orm import Session

from app.store.db import dialect_insert
from app.store.models import (
    Change,
    ChangeEvent,
    DeploymentState,
    Feedback,
    Run,
    ShadowResult,
    utcnow,
)

_STATE = cast(Table, DeploymentState.__table__)
_SHADOW = cast(Table, ShadowResult.__table__)
_GENERATION = select(_STATE.c.generation, _STATE.c.shadow_change_id).where(
    _STATE.c.deployment == bindparam("deployment")
)


@dataclass(frozen=True, kw_only=True)
class ActiveState:
    """A deployment's row of ``deployment_state`` (generation 0, nothing active: the release)."""

    deployment: str
    generation: int = 0
    active_change_id: str | None = None
    shadow_change_id: str | None = None


def deployment_generation(connection: Connection, deployment: str) -> tuple[int, str | None]:
    """``(generation, shadow change)`` of a deployment, ``(0, None)`` before any activation:
    one indexed read in the hook's own transaction."""
    found = connection.execute(_GENERATION, {"deployment": deployment}).first()
    return (0, None) if found is None else (int(found[0]), found[1])


def active_states(connection: Connection) -> dict[str, ActiveState]:
    """Every deployment's row, by IRI."""
    rows = connection.execute(select(_STATE)).mappings()
    return {
        r["deployment"]: ActiveState(
            deployment=r["deployment"],
            generation=int(r["generation"]),
            active_change_id=r["active_change_id"],
            shadow_change_id=r["shadow_change_id"],
        )
        for r in rows
    }


def lock_state(session: Session, deployment: str) -> DeploymentState:
    """A deployment's row, created when missing, locked until the transaction ends: activations
    and rollbacks of one deployment happen one at a time."""
    session.execute(
        dialect_insert(session, _STATE)
        .values(deployment=deployment, generation=0, updated_at=utcnow())
        .on_conflict_do_nothing(index_elements=["deployment"])
    )
    return session.execute(
        select(DeploymentState)
        .where(DeploymentState.deployment == deployment)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).scalar_one()


def set_shadow(session: Session, deployment: str, change_id: str | None) -> None:
    """The change that runs beside the active version from now on (None: none)."""
    state = lock_state(session, deployment)
    state.shadow_change_id = change_id
    state.updated_at = utcnow()


# --- changes ------------------------------------------------------------------------------


def get_change(session: Session, change_id: str, *, for_update: bool = False) -> Change | None:
    if not 0 < len(change_id) <= 36 or not change_id.isprintable():
        return None
    return session.get(Change, change_id, with_for_update=for_update)


def list_changes(
    session: Session, *, deployment: str | None = None, limit: int = 100
) -> list[Change]:
    """Changes, newest first."""
    stmt = select(Change).order_by(Change.created_at.desc(), Change.id).limit(limit)
    if deployment is not None:
        stmt = stmt.where(Change.deployment == deployment)
    return list(session.execute(stmt).scalars())


def add_event(
    session: Session,
    change_id: str,
    state: str,
    actor: str,
    detail: Mapping[str, Any] | None = None,
) -> None:
    session.add(
        ChangeEvent(
            change_id=change_id,
            state=state,
            actor=actor,
            at=utcnow(),
            detail=dict(detail) if detail else None,
        )
    )


def list_events(session: Session, change_id: str) -> list[ChangeEvent]:
    stmt = select(ChangeEvent).where(ChangeEvent.change_id == change_id).order_by(ChangeEvent.id)
    return list(session.execute(stmt).scalars())


# --- runs to replay, feedback to draft from --------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class StoredRun:
    """A hook run as a change's replay reads it."""

    id: str
    outcome: dict[str, Any]
    input: bytes


def runs_to_replay(session: Session, deployment: str, *, last: int) -> list[StoredRun]:
    """The last ``last`` completed runs of a deployment that kept their FHIR input, newest
    first."""
    stmt = (
        select(Run.id, Run.outcome, Run.input)
        .where(
            Run.deployment == deployment,
            Run.status == "completed",
            Run.input.is_not(None),
            Run.outcome.is_not(None),
        )
        .order_by(Run.created_at.desc(), Run.id)
        .limit(last)
    )
    return [
        StoredRun(id=run_id, outcome=dict(outcome), input=bytes(raw))
        for run_id, outcome, raw in session.execute(stmt)
    ]


def override_reasons(session: Session, service_id: str, *, limit: int = 200) -> list[Feedback]:
    """Feedback on a service's cards that gave an override reason, newest first."""
    stmt = (
        select(Feedback)
        .where(Feedback.service_id == service_id, Feedback.override_reason.is_not(None))
        .order_by(Feedback.received_at.desc(), Feedback.id)
        .limit(limit)
    )
    return list(session.execute(stmt).scalars())


# --- shadow mode --------------------------------------------------------------------------


def add_shadow_result(connection: Connection, values: Mapping[str, Any]) -> None:
    """Record what a change decided on one run (once per change and run)."""
    connection.execute(
        dialect_insert(connection, _SHADOW)
        .values(created_at=utcnow(), **values)
        .on_conflict_do_nothing(index_elements=["change_id", "run_id"])
    )


def shadow_results(session: Session, change_id: str) -> list[ShadowResult]:
    stmt = select(ShadowResult).where(ShadowResult.change_id == change_id).order_by(ShadowResult.id)
    return list(session.execute(stmt).scalars())


__all__ = [
    "ActiveState",
    "StoredRun",
    "active_states",
    "add_event",
    "add_shadow_result",
    "deployment_generation",
    "get_change",
    "list_changes",
    "list_events",
    "lock_state",
    "override_reasons",
    "runs_to_replay",
    "set_shadow",
    "shadow_results",
]
