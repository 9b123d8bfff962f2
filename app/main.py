"""The FastAPI app factory: settings in, a service whose resources live in the lifespan.

The engine, the shared httpx client, the compiled, verified ontology and the Runner (every
run's context and persistence) are built when the app starts and closed when it stops
(``app.state``). The server refuses to start with an
ontology that does not verify: it would answer with decisions it cannot justify.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import httpx
from fastapi import APIRouter, FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from app import metrics
from app.errors import Unavailable, install_error_handlers
from app.ontology import Problem
from app.ontology.model import Ontology
from app.readiness import DatabaseProbe
from app.runtime.runner import Runner
from app.settings import Settings, get_settings
from app.store import make_engine
from app.tools.host import ToolHost
from app.tools.packaged import PackagedTools

log = logging.getLogger("horismos")

try:
    __version__ = version("horismos")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"


class OntologyRefused(Unavailable):
    """Raised at startup when the configured ontology fails verification."""

    def __init__(self, problems: list[Problem]) -> None:
        lines = "\n".join(f"  {p.node}: {p.message}" for p in problems)
        super().__init__(
            f"the ontology does not verify ({len(problems)} problem(s)); refusing to serve:\n"
            f"{lines}",
            where="ontology",
        )
        self.problems = problems


def load_verified_ontology(settings: Settings, tools: ToolHost | None = None) -> Ontology:
    """Load the configured (or bundled) ontology and verify it; raise when it is unsound.

    ``tools`` says what ``python:NAME``/``rust:NAME`` bindings resolve to (the packaged tools);
    a binding to a name no package offers, or to an entry point that does not load, is refused.
    Raises ``OntologyError`` when the Turtle does not load and ``OntologyRefused`` when it
    loads but does not verify; either way the service does not start.
    """
    from app.ontology import default_ontology_paths

    paths = [Path(p) for p in settings.ontology_paths] or default_ontology_paths()
    packaged = tools.packaged if tools is not None else PackagedTools()
    return _load_verified(tuple(_fingerprint(p) for p in paths), packaged)


def _fingerprint(path: Path) -> tuple[str, int, int]:
    resolved = path.resolve()
    stat = resolved.stat()
    return (str(resolved), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=8)
def _load_verified(files: tuple[tuple[str, int, int], ...], packaged: PackagedTools) -> Ontology:
    # The compiled Ontology is immutable, so apps in one process (tests, several workers of
    # one interpreter) may share it; a changed file has a new fingerprint and is reloaded.
    from app.ontology import load_ontology, verify

    ontology = load_ontology([Path(name) for name, _, _ in files], registry=packaged.registry)
    problems = list(verify(ontology))
    bindings = {iri: tool.binding for iri, tool in ontology.tools.items()}
    problems += [
        Problem(code="binding", node=iri, message=message)
        for iri, message in packaged.problems_for(bindings)
    ]
    if problems:
        raise OntologyRefused(problems)
    return ontology


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    tools = await run_in_threadpool(ToolHost.discover)
    ontology = await run_in_threadpool(load_verified_ontology, settings, tools)
    engine = make_engine(
        settings.database_url,
        connect_timeout=settings.database_connect_timeout_seconds,
        statement_timeout=settings.database_statement_timeout_seconds,
        pool_timeout=settings.database_pool_timeout_seconds,
    )
    http = httpx.AsyncClient(timeout=settings.fhir_timeout_seconds, follow_redirects=False)
    app.state.engine = engine
    app.state.http = http
    app.state.ontology = ontology
    app.state.tool_host = tools
    app.state.runner = Runner.from_settings(settings, tools=tools)
    app.state.database_probe = DatabaseProbe(engine)
    log.info(
        "serving ontology %s (%s) on %s",
        ontology.version,
        ontology.digest[:12],
        engine.url.render_as_string(hide_password=True),
    )
    try:
        yield
    finally:
        app.state.database_probe.close()
        await http.aclose()
        engine.dispose()


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
    from app.api import resume

    app.include_router(resume.router)  # WaitStep resume; periodic reconciliation (its lifespan)


class OntologyState(BaseModel):
    loaded: bool
    version: str | None
    digest: str | None
    problems: int


class RegisteredTool(BaseModel):
    name: str = Field(description="What python:NAME and rust:NAME bindings use")
    target: str = Field(description="module:attribute of the entry point")
    package: str | None = Field(description="The installed distribution offering it")
    error: str | None = Field(default=None, description="Why it did not load (then unusable)")


class ToolsState(BaseModel):
    registered: list[RegisteredTool] = Field(
        description="Tools installed packages offer in the horismos.tools entry-point group"
    )


class Readiness(BaseModel):
    database: str = Field(description='"ok", or what is wrong with the database')
    ontology: OntologyState
    tools: ToolsState | None = None


def _ops_router() -> APIRouter:
    router = APIRouter(tags=["operations"])

    @router.get("/healthz", summary="The process is alive")
    async def healthz() -> dict[str, str]:
        # answered on the event loop: no thread, no database, nothing another request can hold
        return {"status": "ok"}

    @router.get(
        "/readyz",
        summary="The database is reachable and migrated, the ontology loaded and verified",
        response_model=Readiness,
        responses={503: {"model": Readiness, "description": "Something is not ready"}},
    )
    async def readyz(request: Request) -> JSONResponse:
        probe: DatabaseProbe = request.app.state.database_probe
        database = await probe.state()  # within 1.5 s, whatever the database does
        ontology: Ontology | None = getattr(request.app.state, "ontology", None)
        body: dict[str, Any] = {
            "database": database,
            "ontology": {
                "loaded": ontology is not None,
                "version": ontology.version if ontology else None,
                "digest": ontology.digest if ontology else None,
                "problems": 0,
            },
        }
        host: ToolHost | None = getattr(request.app.state, "tool_host", None)
        if host is not None:
            body["tools"] = host.status()
        ready = database == "ok" and ontology is not None
        return JSONResponse(body, status_code=200 if ready else 503)

    return router


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the service; resources are created when its lifespan starts."""
    settings = settings or get_settings()
    app = FastAPI(
        title="Horismos",
        summary="A neuro-symbolic decision runtime served as a CDS Hooks service",
        version=__version__,
        lifespan=_lifespan,
    )
    app.state.settings = settings
    app.state.metrics = metrics.make_metrics()
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "OPTIONS"],
            allow_headers=["Authorization", "Content-Type"],
        )
    app.add_middleware(metrics.MetricsMiddleware, metrics=app.state.metrics)
    install_error_handlers(app)
    _include_routers(app)
    return app
