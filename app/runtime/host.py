"""Stored runs as their readers need them, and the errors a host raises for bad input.

The Runner (:mod:`app.runtime.runner`) builds every run's context and stores every run; this
module reads them back: the outcome document ``GET /runs/{id}`` returns (the trace assembled from
``trace_events``, where it is stored once) and the recording replay needs.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from app.errors import BadRequest, NotFound
from app.ontology.model import Ontology, WorkflowDef
from app.runtime.replay import RecordedRun
from app.store import repo
from app.store.effects import effect_json, list_effects


class InputRejected(BadRequest):
    """Raised when the structured input does not pass the gate; ``violations`` say why."""

    def __init__(self, violations: list[dict[str, Any]]) -> None:
        first = violations[0]["message"] if violations else "rejected"
        super().__init__(where="instances", message=f"the input was rejected: {first}")
        self.code = "rejected"
        self.violations = violations

    def extensions(self) -> dict[str, Any]:
        return {"violations": self.violations}


class FactsRejected(BadRequest):
    """Raised when a resume's facts fail the World's gate; the run is unchanged."""

    def __init__(self, violations: list[dict[str, Any]]) -> None:
        super().__init__(
            where="instances",
            message=f"the facts were rejected by the World's gate ({len(violations)} violation(s))",
            code="violations",
        )
        self.violations = violations

    def extensions(self) -> dict[str, Any]:
        return {"violations": self.violations}


def find_workflow(ontology: Ontology, name: str) -> WorkflowDef:
    """A workflow by local name or IRI, or ``NotFound``."""
    for wf in ontology.workflows.values():
        if name in (wf.name, wf.iri):
            return wf
    raise NotFound(where="workflow", message=f"no workflow {name!r} in the loaded ontology")


def _with_trace(session: Session, run_id: str, document: dict[str, Any]) -> dict[str, Any]:
    """The document with its trace: stored in ``trace_events`` (runs stored before the trace
    was stored once also carry it in the document itself)."""
    if "trace" not in document:
        document["trace"] = [dict(e.payload) for e in repo.list_trace(session, run_id)]
    return document


def stored_outcome(session: Session, run_id: str) -> dict[str, Any]:
    """A persisted run's outcome JSON with the source versions it read, without the replay
    material."""
    row = repo.get_run(session, run_id)
    if row is None:
        raise NotFound(where="run", message=f"no run {run_id}")
    if row.outcome is None:
        return _unfinished(session, row)
    document = _with_trace(session, run_id, {k: v for k, v in row.outcome.items() if k != "replay"})
    effects = stored_effects(session, run_id)
    if effects:
        document["effects"] = effects
    if row.inputs is not None:
        document["inputs"] = row.inputs
    document["deployment"] = _deployment(row)
    if row.ahead_key is not None:  # computed at order-select, ahead of an order-sign call
        document["answeredAhead"] = True
    if row.reused_run_id is not None:  # answered from the run computed ahead
        document["reusedRun"] = row.reused_run_id
    if row.origin is not None:  # not a CDS client's hook call (an $apply call's: "apply")
        document["origin"] = row.origin
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


def stored_effects(session: Session, run_id: str) -> list[dict[str, Any]]:
    """The writes the run proposed, in order, each with how far it got (``state``: proposed,
    attempted, accepted, conflicted, failed, unknown, refused), what the server answered and
    when the state last changed."""
    return [
        effect_json(e) | {"updatedAt": e.updated_at.isoformat()}
        for e in list_effects(session, run_id=run_id)
    ]


_UNFINISHED = {
    "running": "the run is being computed, or was interrupted and will be taken over by a "
    "retry of its hook call or ended by the periodic task",
    "failed": "the run failed before it produced an outcome; no decision was returned",
}


def _deployment(row: Any) -> dict[str, Any] | None:
    """The deployment a run ran on: its IRI, version and digest, and the IRI, version and
    digest of each ontology it imports (None for runs stored before deployments were
    recorded)."""
    if row.deployment is None:
        return None
    return {
        "iri": row.deployment,
        "version": row.deployment_version,
        "digest": row.ontology_digest,
        "imports": list(row.deployment_imports or []),
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
    document["deployment"] = _deployment(row)
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
    material["outcome"] = _with_trace(session, run_id, document)
    return RecordedRun.from_json(material)


def stored_input(session: Session, run_id: str) -> bytes | None:
    """A hook run's stored FHIR input (``app.cds.hook_input``), None when it has none."""
    return repo.run_input(session, run_id)
