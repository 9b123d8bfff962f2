"""Change control over HTTP: ``/changes`` and ``/deployments`` (docs/changes.md).

Routes are thin: parse, call :class:`~app.changes.control.ChangeControl`, answer. With trusted
issuers configured every route needs a client JWT; who acts is its ``sub``, a proposal's author
must be the caller, and approving, activating and rolling back need the
``horismos/changes.approve`` scope. In open mode the body names who acts, and approval needs a
name in ``HORISMOS_CHANGE_APPROVERS`` (as on the command line).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.api.change_page import render_change_page
from app.api.negotiation import PAGE_HEADERS, prefers_html
from app.cds.auth import CLIENT_JWT_RESPONSE, ClientIdentity, require_client
from app.changes.control import APPROVE_SCOPE, DEFAULT_LAST, MAX_LAST, ChangeControl
from app.changes.envelope import ChangeEnvelope, ChangeView
from app.changes.sandbox import Limits
from app.deps import CatalogDep, DeploymentsDep, EngineDep, JsonBodyChecked, SettingsDep
from app.errors import BadRequest, ClientError
from app.plandefinition.activation import plan_envelope
from app.plandefinition.library import HeldDefinitions
from app.plandefinition.refusals import ApplyRefused

router = APIRouter(tags=["changes"], dependencies=[JsonBodyChecked], responses=CLIENT_JWT_RESPONSE)

Caller = Annotated[ClientIdentity | None, Depends(require_client)]

_REFUSALS: dict[int | str, dict[str, Any]] = {
    403: {"description": "The caller does not hold the role, or is the change's author"},
    404: {"description": "No such change or deployment"},
    409: {"description": "The change is not in a state that allows this step, or is stale"},
    422: {"description": "Refused by the policy or the replay; the body says why"},
}


def _control(engine: EngineDep, catalog: CatalogDep, settings: SettingsDep) -> ChangeControl:
    return ChangeControl(
        engine=engine,
        catalog=catalog,
        approvers=frozenset(settings.change_approvers),
        limits=Limits(
            memory_mb=settings.change_sandbox_memory_mb,
            cpu_seconds=settings.change_sandbox_cpu_seconds,
        ),
    )


Control = Annotated[ChangeControl, Depends(_control)]


class Actor(BaseModel):
    """Who takes the step, in open mode (with trusted issuers: the JWT's ``sub``)."""

    model_config = ConfigDict(extra="forbid")

    actor: str | None = Field(default=None, min_length=1, max_length=200)


class ReplayBody(Actor):
    last: int = Field(default=DEFAULT_LAST, ge=1, le=MAX_LAST)


class ApproveBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reviewer: str | None = Field(default=None, min_length=1, max_length=200)


class DraftBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    service: str = Field(min_length=1, max_length=200, description="The CDS service's id")


def _who(caller: ClientIdentity | None, named: str | None, where: str) -> str:
    if caller is not None:
        sub = caller.claims.get("sub")
        if not isinstance(sub, str) or not sub:
            raise BadRequest(where="Authorization", message="the client JWT names no sub")
        return sub
    if not named:
        raise BadRequest(where=where, message=f"name who takes this step ({where})")
    return named


def _approver(caller: ClientIdentity | None) -> bool:
    """Over HTTP with trusted issuers, the approver role is the JWT's scope."""
    if caller is None:
        return False
    scope = caller.claims.get("scope")
    scopes = scope.split() if isinstance(scope, str) else []
    if APPROVE_SCOPE not in scopes:
        raise ClientError(
            403, "forbidden", "Authorization", f"this step needs the {APPROVE_SCOPE} scope"
        )
    return True


@router.post(
    "/changes",
    status_code=201,
    summary="Propose a change to a deployment (checked by the policy, stored either way)",
    responses=_REFUSALS,
)
def propose(envelope: ChangeEnvelope, control: Control, caller: Caller) -> ChangeView:
    if caller is not None and envelope.author != _who(caller, None, "author"):
        raise ClientError(403, "forbidden", "author", "the author of a proposal is its caller")
    return control.propose(envelope)


@router.post(
    "/changes/draft",
    status_code=201,
    summary="Ask the configured Bridge to draft a change from clinicians' override reasons",
    responses=_REFUSALS,
)
def draft(body: DraftBody, control: Control, request: Request, caller: Caller) -> ChangeView:
    from app.deps import app_runner

    return control.draft(body.service, bridge=app_runner(request.app).default_bridge)


class PlanBody(BaseModel):
    """A PlanDefinition written over FHIR, proposed as a CDS service."""

    model_config = ConfigDict(extra="forbid")

    planDefinition: str = Field(min_length=1, max_length=64, description="Its id")
    author: str | None = Field(default=None, min_length=1, max_length=200)
    rationale: str = Field(default="", max_length=20_000)


@router.post(
    "/changes/plandefinition",
    status_code=201,
    summary="Propose a PlanDefinition written over FHIR as a CDS service (or its latest "
    "write as the next version of one): a change like any other",
    responses=_REFUSALS,
)
def propose_plan(
    body: PlanBody, control: Control, request: Request, caller: Caller, deployments: DeploymentsDep
) -> ChangeView:
    from app.container import running

    author = _who(caller, body.author, "author")
    held = running(request.app).definitions
    if not isinstance(held, HeldDefinitions):
        raise ClientError(404, "not-found", "planDefinition", "no definitions are written here")
    try:
        envelope = plan_envelope(
            body.planDefinition,
            definitions=held,
            deployments=deployments,
            author=author,
            rationale=body.rationale,
        )
    except ApplyRefused as exc:
        raise ClientError(exc.status, exc.code, "planDefinition", str(exc)) from None
    except ValidationError as exc:  # a compiled plan or a name beyond the envelope's limits
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "planDefinition"
        raise ClientError(422, "too-long", where, f"cannot be proposed: {first['msg']}") from None
    return control.propose(envelope)


@router.get("/changes", summary="Changes, newest first")
def list_changes(control: Control, deployment: str | None = None) -> dict[str, Any]:
    return {"changes": [v.model_dump(mode="json") for v in control.views(deployment)]}


@router.get(
    "/changes/{change_id}",
    summary="A change: its state and history, policy, replay and shadow agreement (JSON, or a "
    "page for browsers)",
    response_model=None,
    responses={
        200: {
            "description": "The change as JSON; as an HTML page when `Accept` ranks "
            "`text/html` above `application/json`",
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/ChangeView"}},
                "text/html": {"schema": {"type": "string"}},
            },
        },
        404: {"description": "No such change"},
    },
)
def read_change(change_id: str, control: Control, request: Request) -> Response:
    view = control.view(change_id)
    if prefers_html(request.headers.get("accept")):
        return HTMLResponse(render_change_page(view), headers=PAGE_HEADERS)
    return JSONResponse(view.model_dump(mode="json"), headers={"Vary": "Accept"})


@router.post(
    "/changes/{change_id}/replay",
    summary="Decide the deployment's last N runs again on the change, in a sandbox",
    responses=_REFUSALS,
)
def replay(
    change_id: str, control: Control, caller: Caller, body: ReplayBody | None = None
) -> ChangeView:
    body = body or ReplayBody()
    actor = _who(caller, body.actor, "actor")
    return control.replay(change_id, last=body.last, actor=actor)


@router.post(
    "/changes/{change_id}/approve",
    summary="Approve a replayed change (an approver, never its author); it then runs in shadow",
    responses=_REFUSALS,
)
def approve(
    change_id: str, control: Control, caller: Caller, body: ApproveBody | None = None
) -> ChangeView:
    by_scope = _approver(caller)
    reviewer = _who(caller, (body or ApproveBody()).reviewer, "reviewer")
    return control.approve(change_id, reviewer=reviewer, by_scope=by_scope)


@router.post(
    "/changes/{change_id}/activate",
    summary="Make an approved change the deployment's active version for new hook calls",
    responses=_REFUSALS,
)
def activate(
    change_id: str, control: Control, caller: Caller, body: Actor | None = None
) -> ChangeView:
    _approver(caller)
    actor = _who(caller, (body or Actor()).actor, "actor")
    return control.activate(change_id, actor=actor)


@router.post(
    "/deployments/{deployment}/rollback",
    summary="Return a deployment to the version before its active change",
    responses=_REFUSALS,
)
def rollback(
    deployment: str, control: Control, caller: Caller, body: Actor | None = None
) -> ChangeView:
    _approver(caller)
    actor = _who(caller, (body or Actor()).actor, "actor")
    return control.rollback(deployment, actor=actor)


@router.get("/deployments", summary="The deployments at their active versions")
def list_deployments(deployments: DeploymentsDep, caller: Caller) -> dict[str, Any]:
    return {"deployments": [d.to_json() for d in deployments]}
