"""Leases on running hook runs: renewed by their holder, taken over once expired.

A hook call that claims its run (``app.cds.claim``) holds a lease on it: ``runs.lease_owner``
names the claim, ``runs.lease_expires_at`` says until when. The holder's process renews it
while the run works (``app.cds.leases.LeaseKeeper``); a process that dies stops renewing, and
once the lease has expired a retry of the same hookInstance may take the run over
(:func:`take_over_run`, one winner however many try). Writes of the old holder are fenced: its
final update (``repo.finish_run(owner=…)``) and every outside call after a takeover find the
lease gone and store or send nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import cast

from sqlalchemy import Connection, Table, and_, or_, select, update

from app.store.models import Run

_RUNS = cast(Table, Run.__table__)


def renew_leases(connection: Connection, owners: Sequence[str], until: datetime) -> set[str]:
    """Extend the leases of running runs held by ``owners``; the owners whose run was renewed
    (an owner missing from the answer lost its run: taken over, or no longer running)."""
    if not owners:
        return set()
    renewed = connection.execute(
        update(_RUNS)
        .where(_RUNS.c.lease_owner.in_(list(owners)), _RUNS.c.status == "running")
        .values(lease_expires_at=until)
        .returning(_RUNS.c.lease_owner)
    ).scalars()
    return {str(owner) for owner in renewed}


def take_over_run(
    connection: Connection, run_id: str, *, owner: str, until: datetime, now: datetime
) -> bool:
    """Take a ``running`` run whose lease has expired (or that has none) for ``owner`` until
    ``until``; True for the one caller that gets it, however many try at once."""
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
