"""Runs answered ahead (``app.cds.ahead``): found by the key of their input, and reused as a run
of their own by the order-sign call whose input has the same key.

Plain statements on a ``Connection``, like the rest of the hook path (``app.store.repo``); the
caller owns the transaction.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    Connection,
    String,
    Table,
    Text,
    bindparam,
    func,
    literal_column,
    select,
    text,
)
from sqlalchemy import cast as sql_cast
from sqlalchemy.sql.expression import Executable

from app.store.db import insert_for
from app.store.models import IssuedCard, Run, utcnow
from app.store.repo import CardIssue, record_cards

_RUNS = cast(Table, Run.__table__)
_ISSUED = cast(Table, IssuedCard.__table__)

#: What a reused run takes from the run it reuses as it is (its own id, hookInstance, request,
#: answer and times are its own; a run answered ahead never waits, so it has no wait state).
_COPIED = (
    "service_id",
    "hook",
    "patient",
    "workflow_iri",
    "workflow_version",
    "deployment",
    "deployment_version",
    "deployment_imports",
    "ontology_digest",
    "status",
    "terminal",
    "decision",
    "input",
    "inputs",
)
_OWN = ("id", "hook_instance", "request_digest", "response", "reused_run_id", "created_at")

# the trace and the source versions are copied inside the database: nothing to decode
_COPY_TRACE = text(
    "INSERT INTO trace_events (run_id, seq, step, kind, payload) "
    "SELECT :new, seq, step, kind, payload FROM trace_events WHERE run_id = :old ORDER BY seq"
)
_COPY_SOURCES = text(
    "INSERT INTO source_versions "
    "(run_id, resource_type, resource_id, version_id, last_updated, content_hash) "
    "SELECT :new, resource_type, resource_id, version_id, last_updated, content_hash "
    "FROM source_versions WHERE run_id = :old ORDER BY id"
)


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


@functools.cache
def _copy_run(dialect: str) -> Executable:
    """INSERT INTO runs … SELECT from the run reused: its columns as they are, its outcome with
    its own id for the reused run's, this call's own columns from parameters; nothing when the
    ``(service, hookInstance)`` is taken. Built once per dialect."""
    new = bindparam("id", type_=String)
    if dialect == "postgresql":
        as_json = func.to_jsonb(sql_cast(new, Text))
        outcome: Any = func.jsonb_set(
            func.jsonb_set(_RUNS.c.outcome, literal_column("'{runId}'"), as_json),
            literal_column("'{replay,runId}'"),
            as_json,
        )
    else:
        outcome = func.json_set(_RUNS.c.outcome, "$.runId", new, "$.replay.runId", new)
    own = [
        new,
        bindparam("hook_instance", type_=String),
        bindparam("request_digest", type_=String),
        bindparam("response", type_=_RUNS.c.response.type),
        bindparam("old", type_=String),
        bindparam("created_at", type_=_RUNS.c.created_at.type),
    ]
    source = select(*own, *(_RUNS.c[n] for n in _COPIED), outcome).where(
        _RUNS.c.id == bindparam("old", type_=String)
    )
    statement: Executable = (
        insert_for(dialect, _RUNS)
        .from_select([*_OWN, *_COPIED, "outcome"], source)
        .on_conflict_do_nothing(index_elements=["service_id", "hook_instance"])
        .returning(_RUNS.c.id)
    )
    return statement


def record_reuse(
    connection: Connection,
    *,
    reused: str,
    service_id: str,
    row: Mapping[str, Any],
    cards: Iterable[CardIssue],
) -> bool:
    """Store run ``row`` (``id``, ``hook_instance``, ``request_digest``, ``response``) as a copy of
    the run ``reused`` that names it, with its trace and source versions and the cards it
    answers with; False (nothing stored) when its ``(service, hookInstance)`` is taken."""
    params = {**row, "old": reused, "created_at": utcnow()}  # reused_run_id: "old"
    statement = _copy_run(connection.dialect.name)
    if connection.execute(statement, params).scalar_one_or_none() is None:
        return False
    copies = {"new": row["id"], "old": reused}
    connection.execute(_COPY_TRACE, copies)
    connection.execute(_COPY_SOURCES, copies)
    record_cards(connection, run_id=str(row["id"]), service_id=service_id, cards=cards)
    return True


__all__ = ["find", "record_reuse"]
