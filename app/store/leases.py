"""Leases on running hook runs: renewed by their holder, taken over once expired.

A hook call that claims its run (``app.cds.claim``) holds a lease on it: ``runs.lease_owner``
names the claim, ``runs.lease_expires_at`` says until when. The holder's process renews it
while the run works (``app.cds.leases.LeaseKeeper``); a process that dies stops renewing, and
once the lease has expired a retry of the same hookInstance may take the run over
(``RunStore.take_over``, one winner however many try). Writes of the old holder are fenced: its
final update (``RunStore.finish(owner=…)``) and every outside call after a takeover find the
lease gone and store or send nothing. This module finds the runs whose holder died.
"""

from __future__ import annotations

from datetime import datetime
from typing import cast

from sqlalchemy import Connection, Table, and_, or_, select

from app.store.models import Run

_RUNS = cast(Table, Run.__table__)


def abandoned_runs(
    connection: Connection, *, expired_before: datetime, limit: int = 100
) -> list[str]:
    """Running runs whose lease expired before ``expired_before`` (or that never had one and
    were last touched before it): their process died and no retry took them over."""
    found = connection.execute(
        select(_RUNS.c.id)
        .where(
            _RUNS.c.status == "running",
            or_(
                _RUNS.c.lease_expires_at < expired_before,
                and_(_RUNS.c.lease_expires_at.is_(None), _RUNS.c.updated_at < expired_before),
            ),
        )
        .limit(limit)
    ).scalars()
    return [str(run_id) for run_id in found]
