"""Retention: delete what is stored about runs past a retention period (``horismos purge``).

A run is purged with everything stored about it — its trace, the source versions it read, its
effects, the cards it issued and the feedback on them — once its last activity
(``runs.updated_at``) is older than the cutoff. Never purged, whatever their age:

- a run with a **pending effect** (``proposed``, ``attempted`` or ``unknown``): its write may
  still be reconciled, and the effect log is the only record that a request may have gone out;
- a run still ``running`` or ``suspended`` (it may still act or be resumed).

Feedback no longer linked to any run is purged by the time it was received. Runs go in
batches, each batch one transaction, so a purge of years of data holds no lock for long.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, delete, exists, func, select
from sqlalchemy.orm import Session

from app.store.db import session_scope
from app.store.models import (
    Effect,
    Feedback,
    IssuedCard,
    Run,
    ShadowResult,
    SourceVersion,
    TraceEvent,
)
from app.store.runs import RunStore

#: Effect states that may still change: a run holding one is kept.
PENDING_EFFECT_STATES = ("proposed", "attempted", "unknown")
#: Run states that may still act: kept.
LIVE_RUN_STATES = ("running", "suspended")
_BATCH = 500

_SIMPLE = re.compile(r"^(\d+(?:\.\d+)?)\s*([wdhms])$")
_UNIT = {"w": 604_800, "d": 86_400, "h": 3_600, "m": 60, "s": 1}
_ISO = re.compile(
    r"^P(?:(\d+(?:\.\d+)?)W)?(?:(\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?$"
)


def parse_retention(text: str) -> timedelta:
    """``"90d"``, ``"12h"``, ``"2w"``, ``"30m"``, ``"45s"`` or an ISO 8601 duration of fixed
    length (``"P90D"``, ``"PT12H"``, ``"P2W"``). Years and months are refused: their length
    depends on the date, and a retention period must mean one thing."""
    value = text.strip()
    simple = _SIMPLE.match(value.lower())
    if simple:
        seconds = float(simple.group(1)) * _UNIT[simple.group(2)]
    else:
        iso = _ISO.match(value.upper())
        if iso is None or value.upper() in ("P", "PT") or value.upper().endswith("T"):
            raise ValueError(
                f"{text!r} is not a duration: write e.g. 90d, 12h, P90D or PT12H "
                "(years and months are not accepted: write days, e.g. P365D)"
            )
        weeks, days, hours, minutes, secs = (float(g) if g else 0.0 for g in iso.groups())
        seconds = weeks * 604_800 + days * 86_400 + hours * 3_600 + minutes * 60 + secs
    if seconds <= 0:
        raise ValueError(f"a retention period must be longer than zero, got {text!r}")
    return timedelta(seconds=seconds)


@dataclass(frozen=True, kw_only=True)
class PurgeReport:
    """What one purge deleted, table by table, and the old runs it kept and why."""

    cutoff: datetime
    deleted: dict[str, int] = field(default_factory=dict)
    #: runs older than the cutoff kept because an effect is pending or they may still act
    kept: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"cutoff": self.cutoff.isoformat(), "deleted": dict(self.deleted), "kept": self.kept}


def _purgeable(cutoff: datetime) -> Any:
    pending = exists().where(Effect.run_id == Run.id, Effect.state.in_(PENDING_EFFECT_STATES))
    return (Run.updated_at < cutoff) & Run.status.not_in(LIVE_RUN_STATES) & ~pending


def _delete(session: Session, statement: Any) -> int:
    result = session.execute(statement.execution_options(synchronize_session=False))
    return int(getattr(result, "rowcount", 0) or 0)


def _purge_batch(
    store: RunStore, session: Session, cutoff: datetime, counts: dict[str, int]
) -> int:
    ids = list(
        session.execute(
            select(Run.id).where(_purgeable(cutoff)).order_by(Run.updated_at).limit(_BATCH)
        ).scalars()
    )
    if not ids:
        return 0
    # children first, explicitly: feedback's link to its run would only be set to NULL, and
    # the counts say what went
    children: tuple[tuple[str, Any], ...] = (
        ("feedback", Feedback),
        ("issued_cards", IssuedCard),
        ("trace_events", TraceEvent),
        ("source_versions", SourceVersion),
        ("effects", Effect),
        ("shadow_results", ShadowResult),
    )
    for name, table in children:
        counts[name] += _delete(session, delete(table).where(table.run_id.in_(ids)))
    counts["runs"] += store.purge(session, ids)
    return len(ids)


def purge(engine: Engine, *, older_than: timedelta, now: datetime) -> PurgeReport:
    """Delete every run whose last activity is older than ``now - older_than`` and that has
    no pending effect and cannot act any more, with all that is stored about it."""
    cutoff = now - older_than
    counts = dict.fromkeys(
        (
            "runs",
            "trace_events",
            "source_versions",
            "effects",
            "issued_cards",
            "feedback",
            "shadow_results",
        ),
        0,
    )
    while True:
        with session_scope(engine) as session:
            if _purge_batch(RunStore.of(engine), session, cutoff, counts) < _BATCH:
                break
    with session_scope(engine) as session:
        counts["feedback"] += _delete(
            session,
            delete(Feedback).where(Feedback.run_id.is_(None), Feedback.received_at < cutoff),
        )
        kept = session.execute(
            select(func.count()).select_from(Run).where(Run.updated_at < cutoff)
        ).scalar_one()
    return PurgeReport(cutoff=cutoff, deleted=counts, kept=int(kept))
