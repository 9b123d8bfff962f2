"""The typed rows of the run store (``app.store.runs``): a run's columns, a new run with its
own rows, a card it issued, and what recording it found."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, TypedDict


class RunColumns(TypedDict, total=False):
    """A ``runs`` row's columns, as the store writes them."""

    id: str
    service_id: str | None
    hook: str | None
    hook_instance: str | None
    patient: str | None
    workflow_iri: str
    workflow_version: str | None
    deployment: str | None
    deployment_version: str | None
    deployment_imports: list[dict[str, Any]] | None
    ontology_digest: str | None
    status: str
    terminal: str | None
    decision: dict[str, Any] | None
    request_digest: str | None
    response: Mapping[str, Any] | None
    outcome: dict[str, Any] | None
    input: bytes | None
    inputs: list[dict[str, Any]] | None
    world_state: dict[str, Any] | None
    position: str | None
    wait_deadline: datetime | None
    lease_owner: str | None
    lease_expires_at: datetime | None
    ahead_key: str | None
    reused_run_id: str | None
    origin: str | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, kw_only=True)
class CardIssue:
    """A card a hook run returned: its uuid, the declaration it came from (its summary
    template; None for a card no declaration made) and the rules of the decision's proof."""

    uuid: str
    key: str | None = None
    rules: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class NewRun:
    """Everything a run that sent nothing stores, at once."""

    columns: RunColumns
    #: trace entries from ``seq`` 0 (nothing else wrote the trace of a run not yet stored)
    trace: Sequence[Mapping[str, Any]] = ()
    #: source versions (``source_row`` keys)
    sources: Sequence[Mapping[str, Any]] = ()
    cards: Sequence[CardIssue] = ()
    #: the effects of writes that sent nothing (``effects`` columns but ``run_id``)
    effects: Sequence[Mapping[str, Any]] = ()


class Recorded(NamedTuple):
    """What :meth:`RunStore.record` found: the deployment's generation and shadow change as
    the statement saw them, and whether the run was stored (False: the generation moved, or a
    twin holds the hookInstance)."""

    generation: int
    shadow: str | None
    stored: bool


def source_row(source: Mapping[str, Any]) -> dict[str, Any]:
    """A source version's columns (``resource_id`` or ``id``) without its run."""
    return {
        "resource_type": source["resource_type"],
        "resource_id": source["resource_id"] if "resource_id" in source else source["id"],
        "version_id": source.get("version_id"),
        "last_updated": source.get("last_updated"),
        "content_hash": source.get("content_hash"),
    }


__all__ = ["CardIssue", "NewRun", "Recorded", "RunColumns", "source_row"]
