"""The FastAPI app factory: settings in, a service whose resources live in the lifespan.

:func:`create_app` puts one :class:`~app.container.Container` on ``app.state.container``; the
app's one lifespan builds what it runs on — the deployments (each loaded and verified on its
own), the engine, the shared httpx client, the Runner, the hook service — and closes it when it
stops (:mod:`app.container`), then starts the periodic task. A deployment that does not verify
is not served — it would answer with decisions it cannot justify — while the others are;
``/readyz`` reports each.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter, FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel, Field

from app import __version__, compose, metrics
from app.api_docs import DOCS_ASSETS_PATH, DocsPolicyMiddleware
from app.container import Container, container_of, running, started
from app.cors import CorsRefusalLog
from app.deployments import Deployment, Deployments, load_deployments
from app.errors import install_error_handlers
from app.ontology import Problem
from app.plandefinition.library import load_definitions
from app.plandefinition.services import beside, plan_services
from app.ports import Adapters
from app.settings import Settings, get_settings
from app.tools.host import ToolHost

log = logging.getLogger("horismos")


def configured_deployments(settings: Settings, tools: ToolHost) -> Deployments:
    """The configured (or bundled) ontology files as deployments, each loaded and verified
    against the tools installed packages offer."""
    from app.ontology import default_ontology_paths

    paths = [Path(p) for p in settings.ontology_paths] or default_ontology_paths()
    deployments = load_deployments(paths, tools.packaged)
    if not settings.definition_paths:
        return deployments
    # PlanDefinitions with a named-event trigger in the definition files serve as CDS services
    plans = plan_services(load_definitions(settings.definition_paths), tools.packaged)
    return beside(deployments, plans)


def refuse_unfit_mcp_bindings(deployments: Deployments, tools: ToolHost) -> Deployments:
    """Refuse each serving deployment with an ``mcp://`` binding its server cannot serve (not
    configured, no such tool, schemas that do not fit the declared contract); the others
    serve. A server not reached yet is checked when it connects (``ToolHost``)."""
    for deployment in list(deployments.serving):
        assert deployment.ontology is not None
        found = tools.mcp_problems(deployment.ontology)
        if not found:
            continue
        extra = tuple(Problem(code="binding", node=iri, message=message) for iri, message in found)
        deployments = deployments.replaced(
            replace(deployment, status="refused", problems=deployment.problems + extra)
        )
    return deployments


def _vetted(deployment: Deployment, tools: ToolHost) -> Deployment:
    """A version built from a change, checked like the release against the host's tools."""
    checked = refuse_unfit_mcp_bindings(Deployments([deployment]), tools).find(deployment.id)
    return checked or deployment


def _serving(settings: Settings, tools: ToolHost) -> Deployments:
    """The deployments to serve: loaded, verified, and checked against the MCP servers once
    their sessions are open (a server that is not there makes the deployments that bind it
    unready, a binding that does not fit its tool refuses its deployment; the others serve)."""
    deployments = configured_deployments(settings, tools)
    tools.connect()
    return refuse_unfit_mcp_bindings(deployments, tools)


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """The service's one lifespan: its parts (``app.container``), then the periodic task."""
    from app.api import maintenance

    container = container_of(app)
    deployments_of = partial(_serving, container.settings)
    async with started(container, deployments_of=deployments_of, vet=_vetted) as parts:
        container.running = parts
        try:
            async with maintenance.periodic(app):
                yield
        finally:
            container.running = None


def _include_routers(app: FastAPI) -> None:
    """Every HTTP surface of the service. Add one ``app.include_router(...)`` line per router,
    importing the router module here (inside the function) so a broken layer fails loudly."""
    app.include_router(_ops_router())
    app.include_router(metrics.router)
    from app.cds import routes as cds_routes

    app.include_router(cds_routes.router)  # CDS Hooks: discovery, hook calls, feedback
    from app.api import runs

    app.include_router(runs.router)  # Runs: POST /workflows/{id}/runs, replay
    app.include_router(runs.record_router)  # GET /runs/{id}: client JWT or a signed card link
    from app.api import changes

    app.include_router(changes.router)  # change control: /changes, /deployments
    from app.api import analytics

    app.include_router(analytics.router)  # GET /analytics: cards fired, accepted, overridden
    from app.api import resume

    app.include_router(resume.router)  # WaitStep resume; periodic reconciliation (its lifespan)
    from app.api import fhir

    app.include_router(fhir.router)  # /fhir: the CDS services as PlanDefinitions


class OntologyState(BaseModel):
    loaded: bool = Field(description="At least one deployment is served")
    version: str | None = Field(description="The version, when exactly one deployment is loaded")
    digest: str | None = Field(description="The digest, when exactly one deployment is loaded")
    problems: int = Field(description="Problems of the deployments that are not served")


class DeploymentState(BaseModel):
    id: str
    iri: str = Field(description="The deployment's canonical IRI (its owl:Ontology)")
    version: str = Field(description="Its owl:versionInfo (else sha256: and its digest)")
    digest: str | None
    status: Literal["serving", "refused"]
    services: list[str]
    change: str | None = Field(description="The change this version came from; null: its files")
    generation: int = Field(default=0, description="Activations and rollbacks so far")
    problems: list[dict[str, Any]] = Field(
        default_factory=list, description="Why a refused deployment is not served"
    )
    unready: str | None = Field(
        default=None,
        description="Why a serving deployment cannot answer now: an MCP server it binds is "
        "unreachable (null: ready)",
    )


class RegisteredTool(BaseModel):
    name: str = Field(description="What python:NAME and rust:NAME bindings use")
    target: str = Field(description="module:attribute of the entry point")
    package: str | None = Field(description="The installed distribution offering it")
    error: str | None = Field(default=None, description="Why it did not load (then unusable)")


class McpServerState(BaseModel):
    state: str = Field(description='"ready", "connecting" or "unreachable"')
    error: str | None = Field(description="Why it is not ready (or why its last session ended)")
    tools: list[str] = Field(description="The tools it listed")


class ToolsState(BaseModel):
    registered: list[RegisteredTool] = Field(
        description="Tools installed packages offer in the horismos.tools entry-point group"
    )
    mcp: dict[str, McpServerState] | None = Field(
        default=None, description="Each server of HORISMOS_MCP_SERVERS"
    )


class Readiness(BaseModel):
    database: str = Field(description='"ok", or what is wrong with the database')
    ontology: OntologyState
    deployments: list[DeploymentState] = Field(default_factory=list)
    tools: ToolsState | None = None


def _ops_router() -> APIRouter:
    router = APIRouter(tags=["operations"])

    @router.get("/healthz", summary="The process is alive")
    async def healthz() -> dict[str, str]:
        # answered on the event loop: no thread, no database, nothing another request can hold
        return {"status": "ok"}

    @router.get(
        "/readyz",
        summary="The database is reachable and migrated, and which deployments serve and are "
        "ready (the MCP servers they bind reachable)",
        response_model=Readiness,
        responses={503: {"model": Readiness, "description": "Something is not ready"}},
    )
    async def readyz(request: Request) -> JSONResponse:
        parts = running(request.app)
        database = await parts.database_probe.state()  # within 1.5 s, whatever the database does
        deployments = parts.catalog.current()
        host = parts.tool_host
        states = [d.to_json() for d in deployments]
        for d, state in zip(deployments, states, strict=True):
            state["unready"] = host.unready(d.ontology) if d.serving else None
        only = states[0] if len(states) == 1 else None
        body: dict[str, Any] = {
            "database": database,
            "ontology": {
                "loaded": bool(deployments.serving),
                "version": only["version"] if only else None,
                "digest": only["digest"] if only else None,
                "problems": sum(len(d.problems) for d in deployments),
            },
            "deployments": [
                {k: state.get(k, []) for k in DeploymentState.model_fields} for state in states
            ],
        }
        body["tools"] = host.status()
        host.wake()  # an unreachable MCP server is retried for the next probe
        ready = database == "ok" and any(
            state["status"] == "serving" and not state.get("unready") for state in states
        )
        return JSONResponse(body, status_code=200 if ready else 503)

    return router


def create_app(settings: Settings | None = None, *, adapters: Adapters | None = None) -> FastAPI:
    """Build the service; resources are created when its lifespan starts. ``adapters`` are
    the implementations of the core's ports (:func:`app.compose.adapters` unless given)."""
    settings = settings or get_settings()
    # /docs and /redoc load their scripts and styles from the service, never from a CDN
    app = FastAPIOffline(
        title="Horismos",
        summary="A neuro-symbolic decision runtime served as a CDS Hooks service",
        version=__version__,
        lifespan=_lifespan,
        static_url=DOCS_ASSETS_PATH,
        # Swagger UI would send the OpenAPI document to validator.swagger.io for a badge
        swagger_ui_parameters={"validatorUrl": None},
    )
    app.state.container = Container(
        settings=settings, adapters=adapters or compose.adapters(), metrics=metrics.make_metrics()
    )
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "OPTIONS"],
            allow_headers=["Authorization", "Content-Type"],
        )
    app.add_middleware(
        CorsRefusalLog,
        origins=settings.cors_origins,
        public_base_url=settings.public_base_url,
    )
    app.add_middleware(DocsPolicyMiddleware)
    app.add_middleware(metrics.MetricsMiddleware, metrics=app.state.container.metrics)
    install_error_handlers(app)
    _include_routers(app)
    return app
