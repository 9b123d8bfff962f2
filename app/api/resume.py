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

from typing import Any

from fastapi import APIRouter, Body, Depends, Request

from app.api.waits import expire_overdue_waits, resume_run
from app.cds.auth import CLIENT_JWT_RESPONSE, require_client
from app.deps import DeploymentsDep, EngineDep, JsonBodyChecked, app_runner
from app.runtime.host import FactsRejected
from app.runtime.runner import wait_deadline

__all__ = ["FactsRejected", "expire_overdue_waits", "resume_run", "router", "wait_deadline"]


#: with trusted issuers configured, resuming needs the same client JWT as the CDS routes
router = APIRouter(
    tags=["runs"],
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
    runner = app_runner(request.app)
    outcome = resume_run(engine, deployments, run_id, facts, runner=runner)
    return outcome.to_json()
