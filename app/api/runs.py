"""Runs over HTTP: start a workflow on structured input, read a run, replay it.

Routes are thin: parse, call the app's :class:`~app.runtime.runner.Runner`, map the result. A
run is persisted (run, trace, proof and replay material) before its outcome is returned; if it
cannot be stored the caller gets an error, never an unrecorded decision.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.orm import Session

from app.api.run_page import (
    PAGE_HEADERS,
    link_refused_page,
    load_run_page,
    names_of,
    not_found_page,
    prefers_html,
    render_run_page,
)
from app.cds.auth import (
    CLIENT_JWT_OR_LINK_RESPONSE,
    CLIENT_JWT_RESPONSE,
    RunRecordAccess,
    refuse_link,
    require_client,
    require_client_or_run_link,
)
from app.cds.hook_input import HookInput, InputUnusable, rehydrated_recording
from app.container import container_of, running
from app.deployments import (
    Deployments,
    for_workflow,
    run_columns,
    run_deployment_json,
    served,
)
from app.deps import DeploymentsDep, EngineDep, JsonBodyChecked, SessionDep, app_runner
from app.errors import Conflict, NotFound
from app.ontology.model import Ontology
from app.plandefinition.recorded import run_deployment
from app.runtime.host import stored_input, stored_outcome, stored_recording
from app.runtime.replay import RecordedRun, replay_run
from app.store import repo
from app.store.models import Run
from app.tools import ToolInvoker
from app.tools.packaged import PackagedTools

#: with trusted issuers configured, every run route needs the same client JWT as the CDS routes
router = APIRouter(
    tags=["runs"],
    dependencies=[Depends(require_client), JsonBodyChecked],
    responses=CLIENT_JWT_RESPONSE,
)
#: ``GET /runs/{id}`` alone: the client JWT, or the card's signed link for that one run
#: (``app.cds.links``); kept apart so no other run route can accept a link
record_router = APIRouter(tags=["runs"], responses=CLIENT_JWT_OR_LINK_RESPONSE)


class RunInput(BaseModel):
    """Structured input: instances by local name, optional free text."""

    model_config = ConfigDict(extra="forbid")

    instances: list[dict[str, Any]] = Field(default_factory=list)
    text: str | None = None


class ReplayOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rerun_idempotent: bool = False
    rehydrate: bool = Field(
        default=False,
        description="Hydrate the run's stored FHIR input again (a hook run's) instead of "
        "starting from its stored input World: shows what a changed mapping, unit or value "
        "set does",
    )


def _tools(request: Request) -> ToolInvoker:
    return app_runner(request.app).invoker()


@router.post("/workflows/{workflow}/runs", summary="Run a workflow on structured input")
def create_run(
    workflow: str,
    body: RunInput,
    request: Request,
    deployments: DeploymentsDep,
    engine: EngineDep,
) -> dict[str, Any]:
    """Runs the workflow of the served deployment that declares it (by local name or IRI)."""
    dep, wf = for_workflow(deployments, workflow)
    ontology = served(dep)
    runner = app_runner(request.app)
    started = runner.start(ontology, wf.iri, body.model_dump())
    with engine.begin() as connection:
        runner.save(connection, ontology, started, row=run_columns(dep))
    return {**started.outcome.to_json(), "deployment": run_deployment_json(dep)}


_READ_RUN_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The stored outcome as JSON (for a hook run also `inputs`: every property "
        "it read, `complete` or `absent`, `refused`, `stale`, `conflicting`, `unread`, "
        "`truncated`, with the reasons); "
        "as an HTML page (the decision record a card links to) when `Accept` ranks `text/html` "
        "above `application/json`",
        "content": {
            "application/json": {"schema": {"type": "object", "additionalProperties": True}},
            "text/html": {"schema": {"type": "string"}},
        },
    },
    404: {
        "description": "No such run (an HTML page when HTML was asked for)",
        "content": {"text/html": {"schema": {"type": "string"}}},
    },
}


@record_router.get(
    "/runs/{run_id}",
    summary="A run's outcome: terminal, decision, proof, trace (JSON, or a page for browsers)",
    response_model=None,
    responses=_READ_RUN_RESPONSES,
)
def read_run(
    run_id: str,
    request: Request,
    session: SessionDep,
    access: Annotated[RunRecordAccess, Depends(require_client_or_run_link)],
) -> Response:
    if access.refused is not None:
        challenge = access.challenge or refuse_link(access.refused)
        if not prefers_html(request.headers.get("accept")):
            raise challenge
        headers = {**PAGE_HEADERS, **(challenge.headers() or {})}
        return HTMLResponse(link_refused_page(access.refused), status_code=401, headers=headers)
    if not prefers_html(request.headers.get("accept")):
        return JSONResponse(stored_outcome(session, run_id), headers={"Vary": "Accept"})
    try:
        row = repo.get_run(session, run_id)
        parts = running(request.app)
        deployments = parts.catalog.current()  # labels only: no fresh read needed
        names = (
            _names(session, deployments, row, parts.tool_host.packaged) if row is not None else {}
        )
        zone = container_of(request.app).settings.zone
        page = load_run_page(session, run_id, names=names, zone=zone)
    except NotFound:
        return HTMLResponse(not_found_page(run_id), status_code=404, headers=PAGE_HEADERS)
    return HTMLResponse(render_run_page(page), headers=PAGE_HEADERS)


def _names(
    session: Session, deployments: Deployments, row: Run, packaged: PackagedTools
) -> dict[str, str]:
    """The labels of the run's deployment (a served one, or an authored plan's compiled
    conditions), when it can be loaded; none otherwise (the page falls back to humanised
    names)."""
    try:
        found = run_deployment(session, deployments, row, packaged)
    except NotFound:
        return {}
    return names_of(found.ontology) if found.ontology is not None else {}


@router.post("/runs/{run_id}/replay", summary="Replay a recorded run and report divergence")
def replay(
    run_id: str,
    session: SessionDep,
    deployments: DeploymentsDep,
    request: Request,
    options: ReplayOptions | None = None,
) -> dict[str, Any]:
    """Replays the run on the version of its deployment served now."""
    recorded = stored_recording(session, run_id)
    row = repo.get_run(session, run_id)
    assert row is not None  # stored_recording found it
    packaged = running(request.app).tool_host.packaged
    ontology = served(run_deployment(session, deployments, row, packaged))
    if options is not None and options.rehydrate:
        recorded = _rehydrated(session, ontology, recorded)
    report = replay_run(
        ontology,
        recorded,
        tools=_tools(request),
        rerun_idempotent=options.rerun_idempotent if options else False,
    )
    return report.to_json()


def _rehydrated(session: Session, ontology: Ontology, recorded: RecordedRun) -> RecordedRun:
    raw = stored_input(session, recorded.run_id)
    if raw is None:
        raise Conflict(where="rehydrate", message=f"run {recorded.run_id} has no stored FHIR input")
    try:
        return rehydrated_recording(ontology, recorded, HookInput.from_bytes(raw))
    except InputUnusable as exc:
        raise Conflict(where="rehydrate", message=str(exc)) from None
