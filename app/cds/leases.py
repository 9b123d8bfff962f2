"""Keeping the leases of the runs this process works on (``runs.lease_owner`` / ``_expires_at``).

A claimed run (``app.cds.claim.RunClaim``) is held under a lease for ``lease`` seconds. One
thread per process renews every lease the process holds each ``lease / 3`` seconds, in one
UPDATE, as long as the run is being worked on — at most ``max_hold`` seconds: a run that has
not finished by then (a thread stuck on a peer that never answers) stops being renewed, so it
can be taken over like the run of a dead process.

A process that dies renews nothing; once the lease has expired, a retry of the same
hookInstance takes the run over (``app.store.leases.take_over_run``). A holder knows its lease
is still its own without asking the database while its last renewal is younger than two thirds
of the lease (:meth:`LeaseKeeper.fresh`): nobody may take a run before its lease expires. After
that it asks (the fence), and finds out when the run was taken from it.

Leases are computed from this host's clock and compared with the taker's: hosts serving one
database must keep their clocks within a few seconds of each other (NTP). A skew larger than a
third of the lease could let a taker start while the holder still thinks it holds the run; the
conditional FHIR write (``If-Match``) still refuses the second write.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine

from app.store import leases
from app.store.db import describe_error
from app.store.models import utcnow
from app.store.runs import RunStore

log = logging.getLogger("horismos.leases")

#: The longest a run is renewed (seconds): a run still working after that is considered stuck.
MAX_HOLD_SECONDS = 600.0


class LeaseKeeper:
    """Renews the leases this process holds; one per service."""

    def __init__(self, engine: Engine, *, lease: float, max_hold: float = MAX_HOLD_SECONDS) -> None:
        self.engine = engine
        self.lease = lease
        self.max_hold = max_hold
        self._lock = threading.Lock()
        #: owner → (run id, when it was first held, when it was last renewed; monotonic)
        self._held: dict[str, tuple[str, float, float]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def until(self) -> datetime:
        """When a lease taken or renewed now expires."""
        return utcnow() + timedelta(seconds=self.lease)

    def hold(self, owner: str, run_id: str) -> None:
        """Start renewing ``owner``'s lease on ``run_id`` (just taken, valid for ``lease``)."""
        now = time.monotonic()
        with self._lock:
            self._held[owner] = (run_id, now, now)
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._renew_forever, name="run-leases", daemon=True
                )
                self._thread.start()

    def release(self, owner: str) -> None:
        """Stop renewing ``owner``'s lease (its run is stored, failed, or lost)."""
        with self._lock:
            self._held.pop(owner, None)

    def fresh(self, owner: str) -> bool:
        """Whether ``owner`` certainly still holds its run: renewed less than two thirds of a
        lease ago (nobody may take it before it expires)."""
        with self._lock:
            held = self._held.get(owner)
        return held is not None and time.monotonic() - held[2] < self.lease * 2 / 3

    def confirm(self, owner: str) -> bool:
        """Renew ``owner``'s lease now (the fence before something leaves): False when the run
        was taken over or is not running any more."""
        with self.engine.begin() as connection:
            renewed = RunStore.of(self.engine).renew(connection, [owner], self.until())
        if owner not in renewed:
            self.release(owner)
            return False
        self._renewed([owner], time.monotonic())
        return True

    def _renewed(self, owners: list[str], at: float) -> None:
        with self._lock:
            for owner in owners:
                held = self._held.get(owner)
                if held is not None:
                    self._held[owner] = (held[0], held[1], at)

    def renew(self) -> None:
        """One round: renew every lease held for less than ``max_hold``; forget the others and
        those the database no longer gives this process."""
        now = time.monotonic()
        with self._lock:
            stale = [o for o, (_, since, _) in self._held.items() if now - since > self.max_hold]
            for owner in stale:
                run_id = self._held.pop(owner)[0]
                log.warning(
                    "run %s has worked %.0f s; its lease is no longer renewed",
                    run_id,
                    self.max_hold,
                )
            owners = list(self._held)
        if not owners:
            return
        with self.engine.begin() as connection:
            renewed = RunStore.of(self.engine).renew(connection, owners, self.until())
        self._renewed(sorted(renewed), now)
        for owner in set(owners) - renewed:
            self.release(owner)

    def _renew_forever(self) -> None:
        while not self._stop.wait(self.lease / 3):
            try:
                self.renew()
            except Exception as exc:  # the database is away: the next round tries again
                log.warning("run leases could not be renewed: %s", describe_error(exc))

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def abandoned(row: Mapping[str, Any]) -> bool:
    """A ``running`` run (``repo.hook_run`` shape) whose lease has expired, or that has none:
    its process died."""
    if row["status"] != "running":
        return False
    expires = row.get("lease_expires_at")
    return expires is None or bool(expires < utcnow())


#: How long after its lease expired an abandoned run waits for a retry of its hook call to take
#: it over before the periodic task ends it as failed (seconds).
ABANDONED_GRACE_SECONDS = 120.0


def end_abandoned_runs(
    engine: Engine, *, now: datetime, grace: float = ABANDONED_GRACE_SECONDS
) -> list[str]:
    """End as ``failed`` every run whose holder's lease expired more than ``grace`` seconds ago
    and that no retry took over: no run stays ``running`` for ever. Each is taken over first
    (one process ends it, however many try) and its trace says why. Effects it logged stay as
    they are, for reconciliation (a run with a pending effect is never purged)."""
    with engine.begin() as connection:
        candidates = leases.abandoned_runs(
            connection, expired_before=now - timedelta(seconds=grace)
        )
    ended: list[str] = []
    store = RunStore.of(engine)
    for run_id in candidates:
        with engine.begin() as connection:
            if not store.end_abandoned(connection, run_id, now=now):
                continue
        log.warning("run %s was abandoned by its process and is ended as failed", run_id)
        ended.append(run_id)
    return ended
