"""A run's row as the hook path claims it (``RunStore.claim``), for tests that need a run to
hang effects, feedback or a resume on."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import Engine

from app.store.models import new_id
from app.store.run_rows import RunColumns
from app.store.runs import RunStore


def claimed_run(engine: Engine, workflow_iri: str = "urn:flow", **columns: Any) -> str:
    """Commit a ``running`` run (``columns`` add to it); its id."""
    row = cast(RunColumns, {"id": new_id(), "workflow_iri": workflow_iri, **columns})
    with engine.begin() as connection:
        assert RunStore.of(engine).claim(connection, row)
    return row["id"]
