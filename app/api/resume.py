"""``POST /runs/{id}/resume``: continue a run suspended in a WaitStep with structured facts.

A suspended run keeps its World and position in the ``runs`` row (``world_state``, ``position``,
``wait_deadline``), so any worker — or a restarted service — can continue it. The facts
(structured input, as for ``horismos run --facts``) go through the World's gate with provenance
``human``; a rejected transaction answers 400 with the violations and leaves the run exactly as
it was.

Timeouts are decided when the run is next touched: a resume after ``wait_deadline`` takes the
WaitStep's ``horis:onTimeout`` edge and the facts are not applied; the service's periodic task
(:mod:`app.api.maintenance`) resumes overdue runs with no facts, so a wait nobody answers still
ends. Adapter-mediated tools after a resume have no hook (no fhirServer, no token): their effects
are recorded as ``proposed``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import APIRouter, Body, Depends, Request
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.api import maintenance
from app.cds.auth import CLIENT_JWT_RESPONSE, require_client
from app.deps import EngineDep, JsonBodyChecked, OntologyDep, SettingsDep, tool_invoker
from app.errors import BadRequest, Conflict, NotFound
from app.ontology.model import Ontology, StepDef, WorkflowDef
from app.runtime import Outcome, RunContext, SuspendedRun, resume_workflow
from app.store import Run, repo, session_scope
from app.tools.invoker import ToolInvoker
from app.world import World, load_structured


class FactsRejected(BadRequest):
    """Raised when the resume's facts fail the World's gate; the run is unchanged."""

    def __init__(self, violations: list[dict[str, Any]]) -> None:
        super().__init__(
            where="instances",
            message=f"the facts were rejected by the World's gate ({len(violations)} violation(s))",
            code="violations",
        )
        self.violations = violations

    def to_body(self) -> dict[str, Any]:
        body = super().to_body()
        body["error"]["violations"] = self.violations
        return body


def _wait_step(ontology: Ontology, step_iri: str) -> tuple[WorkflowDef, StepDef]:
    for wf in ontology.workflows.values():
        step = wf.steps.get(step_iri)
        if step is not None and step.kind == "WaitStep":
            return wf, step
    raise Conflict(
        where="position",
        message=f"the run waits in {step_iri}, which the loaded ontology does not declare",
    )


def _suspended(session: Session, ontology: Ontology, run: Run) -> SuspendedRun:
    """The run's SuspendedRun: stored whole, or rebuilt from a stored World and position."""
    state = run.world_state or {}
    if "step" in state and "world" in state:
        return SuspendedRun.from_json(state)
    if not run.position:
        raise Conflict(where="position", message=f"run {run.id} has no recorded wait position")
    wf, _ = _wait_step(ontology, run.position)
    trace = [dict(e.payload) for e in repo.list_trace(session, run.id)]
    return SuspendedRun(
        run_id=run.id,
        workflow=wf.iri,
        step=run.position,
        waiting_since=run.updated_at.isoformat(),
        world=state,
        trace=trace,
        root_workflow=run.workflow_iri,
    )


def wait_deadline(ontology: Ontology, suspended: SuspendedRun) -> datetime | None:
    """When the WaitStep's ``horis:timeout`` passes (None without a timeout)."""
    _, step = _wait_step(ontology, suspended.step)
    if step.timeout is None:
        return None
    since = datetime.fromisoformat(suspended.waiting_since)
    if since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    return since + timedelta(seconds=step.timeout)


def save_run(
    session: Session,
    ontology: Ontology,
    run_id: str,
    outcome: Outcome,
    *,
    trace_from: int = 0,
    response: dict[str, Any] | None = None,
) -> None:
    """Persist an outcome; a suspended one keeps its whole SuspendedRun and its deadline."""
    suspended = outcome.suspended
    repo.save_outcome(
        session,
        run_id,
        status=outcome.status,
        terminal=outcome.terminal,
        decision=outcome.decision,
        outcome=outcome.to_json(),
        response=response,
        trace=outcome.trace[trace_from:],
        world_state=suspended.to_json() if suspended else None,
        position=suspended.step if suspended else None,
        wait_deadline=wait_deadline(ontology, suspended) if suspended else None,
    )


def resume_run(
    engine: Engine,
    ontology: Ontology,
    run_id: str,
    facts: dict[str, Any],
    *,
    now: datetime,
    bridge: Any = None,
    tools: ToolInvoker | None = None,
) -> Outcome:
    """Continue a suspended run; the row stays locked from reading it to saving the outcome,
    so two concurrent resumes cannot both continue it (the second gets 409)."""
    with session_scope(engine) as session:
        run = repo.get_run(session, run_id, for_update=True)
        if run is None:
            raise NotFound(where="runId", message=f"no run {run_id}")
        if run.status != "suspended":
            raise Conflict(where="runId", message=f"run {run_id} is {run.status}, not waiting")
        suspended = _suspended(session, ontology, run)
        deadline = run.wait_deadline or wait_deadline(ontology, suspended)
        overdue = deadline is not None and now > deadline
        if not overdue:
            trial = World.from_json(ontology, suspended.world)
            tx = load_structured(trial, facts, provenance="human")
            if not tx.ok:
                raise FactsRejected([v.to_json() for v in tx.violations])
        ctx = RunContext(now=now, bridge=bridge, tools=tools or ToolInvoker(), run_id=run_id)
        outcome = resume_workflow(ontology, suspended, facts, ctx)
        save_run(session, ontology, run_id, outcome, trace_from=len(suspended.trace))
    return outcome


def expire_overdue_waits(
    engine: Engine,
    ontology: Ontology,
    *,
    now: datetime,
    bridge: Any = None,
    tools: Callable[[], ToolInvoker] | None = None,
    limit: int = 500,
) -> list[Outcome]:
    """Resume, with no facts, every suspended run whose wait deadline has passed (the stored
    ``wait_deadline``, else the one its WaitStep's ``horis:timeout`` implies)."""
    with session_scope(engine) as session:
        due: list[str] = []
        for run in repo.list_runs(session, status="suspended", limit=limit):
            deadline = run.wait_deadline
            if deadline is None:
                try:
                    deadline = wait_deadline(ontology, _suspended(session, ontology, run))
                except Conflict:
                    continue  # waits somewhere this ontology does not declare
            if deadline is not None and deadline <= now:
                due.append(run.id)
    done: list[Outcome] = []
    for run_id in due:
        try:
            done.append(
                resume_run(
                    engine,
                    ontology,
                    run_id,
                    {},
                    now=now,
                    bridge=bridge,
                    tools=tools() if tools is not None else None,
                )
            )
        except Conflict:
            continue  # resumed by someone else meanwhile
    return done


#: with trusted issuers configured, resuming needs the same client JWT as the CDS routes
router = APIRouter(
    tags=["runs"],
    lifespan=maintenance.lifespan,
    dependencies=[Depends(require_client), JsonBodyChecked],
    responses=CLIENT_JWT_RESPONSE,
)

_EXAMPLE = {"instances": [{"id": "c1", "approved": True}]}


@router.post(
    "/runs/{run_id}/resume",
    summary="Continue a run waiting in a WaitStep with structured facts",
    responses={
        400: {"description": "The facts were rejected by the World's gate; the run is unchanged"},
        404: {"description": "No such run"},
        409: {"description": "The run is not waiting (completed, failed, or resumed meanwhile)"},
    },
)
def resume(
    run_id: str,
    request: Request,
    engine: EngineDep,
    ontology: OntologyDep,
    settings: SettingsDep,
    facts: dict[str, Any] = Body(default_factory=dict, examples=[_EXAMPLE]),
) -> dict[str, Any]:
    """The outcome after the resume, ``status`` ``suspended`` if it waits again."""
    from app.bridge import bridge_from_model_string

    bridge = bridge_from_model_string(settings.bridge_model, settings)
    outcome = resume_run(
        engine,
        ontology,
        run_id,
        facts,
        now=datetime.now(UTC),
        bridge=bridge,
        tools=tool_invoker(request.app.state),
    )
    return outcome.to_json()
