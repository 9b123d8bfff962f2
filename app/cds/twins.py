"""A hook call whose hookInstance another call holds: it answers with that call's stored answer.

CDS Hooks clients retry, and two requests of one call can run at once. The one that claims the
run (``app.cds.claim``) answers; :func:`stored_answer` is what the other does: it waits for the
stored response and answers it verbatim, refuses a different body or a failed run with 409, and
takes over a run whose holder's lease has expired (its process died) to run it again under its
own id.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import anyio
from anyio import to_thread
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from app.cds.claim import RunClaim, take_over_claim
from app.cds.errors import HookInstanceConflict, StoreUnavailable
from app.cds.leases import LeaseKeeper, abandoned
from app.store import repo
from app.store.db import describe_error

log = logging.getLogger("horismos.cds")

#: How long a duplicate call waits for the first caller's stored answer, beyond the FHIR deadline.
DUPLICATE_GRACE_SECONDS = 30.0
_POLL_SECONDS = 0.02

#: Runs a claimed run to its stored answer: None when another call holds the hookInstance.
RunOnClaim = Callable[[RunClaim], dict[str, Any] | None]


async def stored_answer(
    engine: Engine,
    leases: LeaseKeeper | None,
    *,
    service_id: str,
    hook_instance: str,
    digest: str,
    template: Mapping[str, Any],
    run: RunOnClaim,
    fhir_timeout: float,
) -> dict[str, Any]:
    """The answer stored for this hookInstance by the call that holds it: verbatim once it
    is stored (a twin still running is waited for, within the call's deadline), 409 for a
    different body or a failed run. A run whose holder's lease has expired is taken over: run
    again under its own id, after its earlier writes are reconciled (``resumed`` claim), and
    answered."""

    def look() -> Mapping[str, Any] | None:
        with engine.connect() as connection:
            return repo.hook_run(connection, service_id, hook_instance)

    with anyio.move_on_after(fhir_timeout + DUPLICATE_GRACE_SECONDS):
        while True:
            try:
                row = await to_thread.run_sync(look)
            except SQLAlchemyError as exc:
                log.error("cannot read hookInstance %s: %s", hook_instance, describe_error(exc))
                raise StoreUnavailable.one(
                    "transient", "the decision store is unavailable; retry later"
                ) from None
            if row is not None and row["request_digest"] != digest:
                raise HookInstanceConflict.one(
                    "conflict",
                    f"hookInstance {hook_instance} was already used with a different request",
                    "hookInstance",
                )
            if row is not None and row["response"] is not None:
                return dict(row["response"])
            if row is not None and row["status"] == "failed":
                raise HookInstanceConflict.one(
                    "conflict",
                    f"hookInstance {hook_instance} failed earlier; send a new hookInstance",
                    "hookInstance",
                )
            if row is not None and leases is not None and abandoned(row):
                taken = await _take_over(engine, leases, str(row["id"]), template, run)
                if taken is not None:
                    return taken
            await anyio.sleep(_POLL_SECONDS)
    raise HookInstanceConflict.one(
        "conflict",
        f"hookInstance {hook_instance} is being answered by another request",
        "hookInstance",
    )


async def _take_over(
    engine: Engine,
    leases: LeaseKeeper,
    run_id: str,
    template: Mapping[str, Any],
    run: RunOnClaim,
) -> dict[str, Any] | None:
    """Take the abandoned run ``run_id`` and run it again; None when another call took it
    first (then its answer is waited for like any twin's)."""
    claim = await to_thread.run_sync(lambda: take_over_claim(engine, leases, run_id, template))
    if claim is None:
        return None
    return await to_thread.run_sync(lambda: run(claim), abandon_on_cancel=True)


__all__ = ["DUPLICATE_GRACE_SECONDS", "RunOnClaim", "stored_answer"]
