"""The service's periodic work: settle unknown commit effects, end overdue waits, forget old jtis,
purge runs past the retention period.

Every ``settings.reconcile_interval_seconds`` (0 turns it off) one tick runs in a worker thread:
:func:`app.store.jtis.purge_expired_jtis` (client JWT ids whose tokens can no longer be accepted),
the reconciler's ``pending`` (:class:`app.ports.Reconciler`, the FHIR one in this service), then
:func:`app.api.waits.expire_overdue_waits`, :func:`app.cds.leases.end_abandoned_runs` (runs
whose process died and that no retry took over), then, when ``settings.retention_period`` is set,
:func:`app.store.retention.purge`. With several workers each runs its own loop; the
work is idempotent (a settled effect is not pending any more, a resumed run is not suspended).

The app's lifespan starts it (:func:`periodic`), which also registers the CDS feedback listener:
feedback that accepts a card's suggestion reconciles the effects of that card's run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool

from app.cds.feedback import FeedbackListener
from app.container import container_of, running
from app.store import jtis, session_scope

log = logging.getLogger("horismos.maintenance")


@dataclass(frozen=True, kw_only=True)
class TickReport:
    """What one tick did."""

    settled: list[dict[str, str]]
    expired: list[str]
    #: client JWT ids forgotten because their tokens can no longer be accepted
    forgotten_jtis: int = 0
    #: rows deleted by the retention purge, by table (empty when no retention period is set)
    purged: dict[str, int] = field(default_factory=dict)
    #: runs abandoned by a dead process, and not taken over by a retry, ended as failed
    abandoned: list[str] = field(default_factory=list)


def tick(app: FastAPI, *, now: datetime | None = None) -> TickReport:
    """One round of periodic work (also callable directly, e.g. from tests or an admin task)."""
    from app.api.waits import expire_overdue_waits
    from app.cds.leases import end_abandoned_runs
    from app.deps import app_runner

    container = container_of(app)
    parts = running(app)
    engine = parts.engine
    moment = now or datetime.now(UTC)
    with session_scope(engine) as session:
        forgotten = jtis.purge_expired_jtis(session, moment)
    settled = [s.to_json() for s in container.adapters.reconciler.pending(engine, now=moment)]
    deployments = parts.catalog.refresh(engine)
    outcomes = expire_overdue_waits(engine, deployments, now=moment, runner=app_runner(app))
    expired = [o.run_id for o in outcomes]
    abandoned = end_abandoned_runs(engine, now=moment)
    purged: dict[str, int] = {}
    retention = container.settings.retention_period
    if retention:
        from app.store.retention import parse_retention, purge

        purged = purge(engine, older_than=parse_retention(retention), now=moment).deleted
    return TickReport(
        settled=settled,
        expired=expired,
        forgotten_jtis=forgotten,
        purged=purged,
        abandoned=abandoned,
    )


async def _loop(app: FastAPI, interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        try:
            report = await run_in_threadpool(tick, app)
        except Exception:  # one failed round (database restarting…) must not end the loop
            log.exception("periodic reconciliation failed; retrying in %ss", interval)
            continue
        if report.settled or report.expired or report.purged.get("runs") or report.abandoned:
            log.info(
                "reconciled %d effect(s), ended %d wait(s), ended %d abandoned run(s), "
                "purged %d run(s)",
                len(report.settled),
                len(report.expired),
                len(report.abandoned),
                report.purged.get("runs", 0),
            )


def _feedback_listener(app: FastAPI) -> FeedbackListener:
    reconciler = container_of(app).adapters.reconciler
    engine = running(app).engine

    def on_feedback(entry: Any) -> None:
        if entry.outcome != "accepted" or not entry.run_id:
            return
        for s in reconciler.run(engine, entry.run_id):
            log.info("feedback on run %s: %s %s -> %s", s.run_id, s.effect_id, s.before, s.after)

    return on_feedback


@asynccontextmanager
async def periodic(app: FastAPI) -> AsyncIterator[None]:
    """Start the periodic task (unless the interval is 0) and listen to CDS feedback; the
    app's lifespan runs this once its parts are built."""
    container = container_of(app)
    running(app).feedback_listeners.append(_feedback_listener(app))
    interval = float(container.settings.reconcile_interval_seconds)
    task = asyncio.create_task(_loop(app, interval)) if interval > 0 else None
    container.maintenance_task = task
    try:
        yield
    finally:
        container.maintenance_task = None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
