"""Runs answered ahead (``app.cds.ahead``): found by the key of their input (the order-sign call
whose input has the same key reuses it: ``RunStore.reuse``).

On PostgreSQL the lookup every order-sign call makes is one prepared SELECT on the run store's
own connections (the run, its answer and its cards together), outside any transaction; SQLite
reads the same on a connection of the engine.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import Connection, Engine, Table, select

from app.store.db import run_connections
from app.store.models import IssuedCard, Run

_RUNS = cast(Table, Run.__table__)
_ISSUED = cast(Table, IssuedCard.__table__)


#: :func:`find` in one statement: the newest such run, its answer, its time and its cards
_PG_FIND = (
    "SELECT r.id, r.response, r.outcome->'replay'->>'now', "
    "(SELECT coalesce(json_agg(json_build_array(c.card_uuid, c.card_key, c.rules)), '[]') "
    "FROM issued_cards c WHERE c.run_id = r.id) "
    "FROM runs r WHERE r.service_id = %(service)s AND r.ahead_key = %(key)s "
    "AND r.status = 'completed' AND r.created_at >= %(since)s "
    "ORDER BY r.created_at DESC LIMIT 1"
)


def lookup(engine: Engine, service_id: str, key: str, since: datetime) -> dict[str, Any] | None:
    """:func:`find`, outside any transaction: on PostgreSQL one prepared statement."""
    if engine.dialect.name != "postgresql":
        with engine.connect() as connection:
            return find(connection, service_id, key, since)
    params = {"service": service_id, "key": key, "since": since}
    row, _again = run_connections(engine).fetchone(_PG_FIND, params)
    if row is None:
        return None
    return _found(*row)


def find(
    connection: Connection, service_id: str, key: str, since: datetime
) -> dict[str, Any] | None:
    """The newest completed run of ``service_id`` answered ahead with ``key``, stored at or
    after ``since``, as what the call that reuses it rewrites as its own: its ``id``, its
    ``response``, the time it was computed for (``now``, ISO 8601) and the ``cards`` it issued
    (card uuid → (declaration key, rules)); None when there is none. The rest is copied
    inside the database (``RunStore.reuse``)."""
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
    return _found(run_id, response, computed, cards)


def _found(run_id: Any, response: Any, computed: Any, cards: Any) -> dict[str, Any]:
    """What :func:`find` answers, from the run's id, answer, time and (uuid, key, rules) cards."""
    return {
        "id": str(run_id),
        "response": response,
        "now": computed,
        "cards": {uuid: (key, tuple(rules or ())) for uuid, key, rules in cards},
    }


__all__ = ["find", "lookup"]
