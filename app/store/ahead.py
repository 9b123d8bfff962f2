"""Runs answered ahead (``app.cds.ahead``): found by the key of their input (the order-sign call
whose input has the same key reuses it: ``RunStore.reuse``).

Plain statements on a ``Connection``, like the rest of the hook path (``app.store.repo``); the
caller owns the transaction.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import Connection, Table, select

from app.store.models import IssuedCard, Run

_RUNS = cast(Table, Run.__table__)
_ISSUED = cast(Table, IssuedCard.__table__)


def find(
    connection: Connection, service_id: str, key: str, since: datetime
) -> dict[str, Any] | None:
    """The newest completed run of ``service_id`` answered ahead with ``key``, stored at or
    after ``since``, as what the call that reuses it rewrites as its own: its ``id``, its
    ``response``, the time it was computed for (``now``, ISO 8601) and the ``cards`` it issued
    (card uuid → (declaration key, rules)); None when there is none. The rest is copied
    inside the database (:func:`record_reuse`)."""
    statement = (
        select(_RUNS.c.id, _RUNS.c.response, _RUNS.c.outcome["replay"]["now"].as_string())
        .where(
            _RUNS.c.service_id == service_id,
            _RUNS.c.ahead_key == key,
            _RUNS.c.status == "completed",
            _RUNS.c.created_at >= since,
        )
        .order_by(_RUNS.c.created_at.desc())
        .limit(1)
    )
    found = connection.execute(statement).first()
    if found is None:
        return None
    run_id, response, computed = found
    cards = connection.execute(
        select(_ISSUED.c.card_uuid, _ISSUED.c.card_key, _ISSUED.c.rules).where(
            _ISSUED.c.run_id == run_id
        )
    )
    return {
        "id": str(run_id),
        "response": response,
        "now": computed,
        "cards": {uuid: (key, tuple(rules or ())) for uuid, key, rules in cards},
    }


__all__ = ["find"]
