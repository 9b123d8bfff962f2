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
are recorded as ``proposed``. The app's :class:`~app.runtime.runner.Runner` continues the run and
stores it: a hook run keeps the response its EHR was given and its replay material.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Body, Depends, Request
from sqlalchemy import Engine

from app.api import maintenance
from app.cds.auth import CLIENT_JWT_RESPONSE, require_client
from app.deployments import DeploymentNotServed, Deployments, of_run, served
from app.deps import DeploymentsDep, EngineDep, JsonBodyChecked, app_runner
from app.errors import Conflict, NotFound
from app.ontology.model import Ontology
from app.runtime import Outcome
from app.runtime.host import FactsRejected
from app.runtime.runner import Runner, suspended_run, wait_deadline
from app.store import repo, session_scope

__all__ = ["FactsRejected", "expire_overdue_waits", "resume_run", "router", "wait_deadline"]


def resume_run(
    engine: Engine,
    deployments: Deployments,
    run_id: str,
    facts: dict[str, Any],
    *,
    now: datetime | None = None,
    runner: Runner | None = None,
) -> Outcome:
    """Continue a suspended run on the served version of its deployment
    (:meth:`Runner.resume`): 404 for no run, 409 when it is not waiting, 400 when the facts
    are refused, 503 when its deployment is not served; the stored response and replay material
    stay."""

    def ontology_of(row: Mapping[str, Any]) -> Ontology:
        return served(of_run(deployments, row.get("deployment"), str(row["workflow_iri"])))

    return (runner or Runner()).resume(engine, ontology_of, run_id, facts, now=now)


def expire_overdue_waits(
    engine: Engine,
    deployments: Deployments,
    *,
    now: datetime,
    runner: Runner | None = None,
    limit: int = 500,
) -> list[Outcome]:
    """Resume, with no facts, every suspended run whose wait deadline has passed (the stored
    ``wait_deadline``, else the one its WaitStep's ``horis:timeout`` implies)."""
    with session_scope(engine) as session:
        due: list[str] = []
        for run in repo.list_runs(session, status="suspended", limit=limit):
            deadline = run.wait_deadline
            if deadline is None:
                row = {c: getattr(run, c) for c in ("id", "world_state", "position")}
                row |= {"updated_at": run.updated_at, "workflow_iri": run.workflow_iri}
                try:
                    ontology = served(of_run(deployments, run.deployment, run.workflow_iri))
                    deadline = wait_deadline(ontology, suspended_run(ontology, row, []))
                except (Conflict, NotFound, DeploymentNotServed):
                    continue  # waits somewhere no served deployment declares
            if deadline is not None and deadline <= now:
                due.append(run.id)
    done: list[Outcome] = []
    for run_id in due:
        try:
            done.append(resume_run(engine, deployments, run_id, {}, now=now, runner=runner))
        except (Conflict, NotFound, DeploymentNotServed):
            continue  # resumed by someone else meanwhile, or its deployment is not served
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
    deployments: DeploymentsDep,
    facts: dict[str, Any] = Body(default_factory=dict, examples=[_EXAMPLE]),
) -> dict[str, Any]:
    """The outcome after the resume, ``status`` ``suspended`` if it waits again."""
    runner = app_runner(request.app.state)
    outcome = resume_run(engine, deployments, run_id, facts, runner=runner)
    return outcome.to_json()
