"""The runtime's impure edge: the clock, run ids, persistence — what the CLI and the API share.

The interpreter never imports this module; this module builds the ``RunContext`` the interpreter
reads (wall-clock ``now``, a fresh run id, the configured Bridge and tools) and stores what a run
produced with the store's repository functions.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from app.bridge.protocol import Bridge
from app.errors import BadRequest, NotFound
from app.ontology.model import Ontology, WorkflowDef
from app.runtime.context import RunContext, ToolPort
from app.runtime.interpreter import run_workflow
from app.runtime.names import namespace_of, qualify_structured
from app.runtime.outcome import Outcome, SuspendedRun
from app.runtime.replay import RecordedRun
from app.store import repo
from app.world import World, load_structured


class InputRejected(BadRequest):
    """Raised when the structured input does not pass the gate; ``violations`` say why."""

    def __init__(self, violations: list[dict[str, Any]]) -> None:
        first = violations[0]["message"] if violations else "rejected"
        super().__init__(where="instances", message=f"the input was rejected: {first}")
        self.code = "rejected"
        self.violations = violations

    def to_body(self) -> dict[str, Any]:
        body = super().to_body()
        body["error"]["violations"] = self.violations
        return body


@dataclass(frozen=True, kw_only=True)
class StartedRun:
    outcome: Outcome
    recorded: RecordedRun
    workflow: WorkflowDef


def find_workflow(ontology: Ontology, name: str) -> WorkflowDef:
    """A workflow by local name or IRI, or ``NotFound``."""
    for wf in ontology.workflows.values():
        if name in (wf.name, wf.iri):
            return wf
    raise NotFound(where="workflow", message=f"no workflow {name!r} in the loaded ontology")


def start_run(
    ontology: Ontology,
    workflow: str,
    data: dict[str, Any],
    *,
    bridge: Bridge | None,
    tools: ToolPort | None,
    text: str | None = None,
    run_id: str | None = None,
    now: datetime | None = None,
    bridge_for: Callable[[str | None], Bridge | None] | None = None,
) -> StartedRun:
    """Load the structured input (provenance ``api``) and run ``workflow`` on it; ``bridge_for``
    picks the Bridge of a step's ``horis:model`` (``app.bridge.BridgeResolver``)."""
    wf = find_workflow(ontology, workflow)
    started = now or datetime.now(UTC)
    world = World(ontology, now=started)
    if data.get("instances"):
        tx = load_structured(world, qualify_structured(ontology, data, namespace_of(wf.iri)))
        if not tx.ok:
            raise InputRejected([v.to_json() for v in tx.violations])
    input_world = world.to_json()
    text = text if text is not None else data.get("text")
    ctx = RunContext(
        now=started,
        bridge=bridge,
        bridge_for=bridge_for,
        tools=tools,
        text=text if isinstance(text, str) else None,
        run_id=run_id or str(uuid.uuid4()),
        clock=lambda: datetime.now(UTC),
    )
    outcome = run_workflow(ontology, wf.iri, world, ctx)
    recorded = RecordedRun.of(outcome, input_world=input_world, text=ctx.text, now=started)
    return StartedRun(outcome=outcome, recorded=recorded, workflow=wf)


def save_run(session: Session, ontology: Ontology, run: StartedRun) -> None:
    """Persist the run, its trace and its proof in the caller's transaction."""
    outcome = run.outcome
    repo.claim_run(
        session,
        workflow_iri=run.workflow.iri,
        workflow_version=run.workflow.version,
        ontology_digest=ontology.digest,
        run_id=outcome.run_id,
    )
    document = outcome_document(run.recorded)
    suspended = outcome.suspended
    repo.save_outcome(
        session,
        outcome.run_id,
        status=outcome.status,
        terminal=outcome.terminal,
        decision=outcome.decision,
        outcome=document,
        trace=outcome.trace,
        world_state=suspended.to_json() if suspended is not None else None,
        position=suspended.step if suspended is not None else None,
        wait_deadline=_deadline(ontology, suspended),
    )


def _deadline(ontology: Ontology, suspended: SuspendedRun | None) -> datetime | None:
    if suspended is None:
        return None
    for wf in ontology.workflows.values():
        step = wf.steps.get(suspended.step)
        if step is not None and step.timeout is not None:
            since = datetime.fromisoformat(suspended.waiting_since)
            return since + timedelta(seconds=step.timeout)
    return None


def outcome_document(recorded: RecordedRun) -> dict[str, Any]:
    """The outcome JSON to store in ``runs.outcome``: DESIGN §9 plus a ``replay`` key holding
    the recorded input (World before the run, text, time) that ``horismos replay`` needs.
    Any layer that persists runs (the CDS service too) stores this to make them replayable."""
    document = dict(recorded.outcome)
    material = recorded.to_json()
    material.pop("outcome")
    document["replay"] = material
    return document


def stored_outcome(session: Session, run_id: str) -> dict[str, Any]:
    """A persisted run's outcome JSON (DESIGN §9) with the source versions it read, without the
    replay material."""
    row = repo.get_run(session, run_id)
    if row is None:
        raise NotFound(where="run", message=f"no run {run_id}")
    if row.outcome is None:
        return _unfinished(session, row)
    document = {k: v for k, v in row.outcome.items() if k != "replay"}
    sources = repo.list_sources(session, run_id)
    if sources:
        document["sources"] = [
            {
                "resourceType": s.resource_type,
                "id": s.resource_id,
                "versionId": s.version_id,
                "lastUpdated": s.last_updated,
            }
            for s in sources
        ]
    return document


_UNFINISHED = {
    "running": "the run is being computed, or was interrupted and will be taken over by a "
    "retry of its hook call or ended by the periodic task",
    "failed": "the run failed before it produced an outcome; no decision was returned",
}


def _unfinished(session: Session, row: Any) -> dict[str, Any]:
    """What is known of a run that has no outcome (still running, interrupted, or failed): the
    same keys as an outcome, empty where nothing was decided, and what the run logged."""
    iri = str(row.workflow_iri)
    document: dict[str, Any] = {
        "runId": row.id,
        "workflow": iri.rsplit("#", 1)[-1].rsplit("/", 1)[-1],
        "version": row.workflow_version,
        "status": row.status,
        "terminal": row.terminal,
        "goal_reached": False,
        "proof": None,
        "trace": [dict(e.payload) for e in repo.list_trace(session, row.id)],
        "violations": [],
        "note": _UNFINISHED.get(str(row.status), "the run has no stored outcome"),
    }
    if row.status == "running" and row.lease_expires_at is not None:
        document["leaseExpiresAt"] = row.lease_expires_at.isoformat()
    return document


def stored_recording(session: Session, run_id: str) -> RecordedRun:
    """A persisted run as replay needs it."""
    row = repo.get_run(session, run_id)
    if row is None or row.outcome is None or "replay" not in row.outcome:
        raise NotFound(where="run", message=f"no replayable run {run_id}")
    document = dict(row.outcome)
    material = dict(document.pop("replay"))
    material["outcome"] = document
    return RecordedRun.from_json(material)
