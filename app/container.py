"""What the running service is made of: one typed object on ``app.state.container``.

:func:`app.main.create_app` builds the :class:`Container` with what is known before the service
starts — its settings, the adapters that implement the core's ports (:mod:`app.compose`) and
its metrics. The app's one lifespan (:func:`started`) then builds the rest, in this order, and
closes it in the reverse one:

1. the tool host (installed tools, MCP sessions) and the deployments, each verified on its own;
2. the database engine, the shared HTTP client and the catalog of active versions;
3. the Runner (every run's context and persistence) and the database probe of ``/readyz``;
4. the client authenticator, the run leases, the shadow runner and the hook service;
5. the periodic task (reconciliation, expired waits, retention) and its feedback listener.

Routes read what they need through the ``Annotated`` dependencies of :mod:`app.deps`, each
typed where it is read; nothing else is kept on ``app.state``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from anyio import CapacityLimiter
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool

from app.cds.auth import ClientAuthenticator, build_authenticator
from app.cds.feedback import FeedbackListener
from app.cds.leases import LeaseKeeper
from app.cds.service import HookDeps, HookService
from app.changes.shadow import ShadowRunner
from app.cors import log_cors_origins
from app.deployments import Deployment, Deployments
from app.deployments.catalog import Catalog
from app.heap import freeze_startup_heap
from app.metrics import Metrics
from app.plandefinition.library import (
    Definitions,
    DefinitionSource,
    HeldDefinitions,
    load_definitions,
)
from app.ports import Adapters
from app.readiness import DatabaseProbe
from app.runtime.runner import Runner
from app.settings import Settings
from app.store import make_engine
from app.store.db import describe_error
from app.store.runs import RunStore
from app.terminology import Terminology, TerminologyNotInstalled, load_terminology
from app.terminology.choice import TerminologyChoice
from app.tools.host import ToolHost
from app.ucum import warm

log = logging.getLogger("horismos")


@dataclass(frozen=True, kw_only=True)
class Running:
    """The parts the lifespan built, alive until the service stops."""

    engine: Engine
    http: httpx.AsyncClient
    catalog: Catalog
    tool_host: ToolHost
    runner: Runner
    database_probe: DatabaseProbe
    authenticator: ClientAuthenticator
    hooks: HookService
    leases: LeaseKeeper
    shadow: ShadowRunner
    #: the FHIR definitions ``$apply`` finds: ``HORISMOS_DEFINITION_PATHS``, then those written
    #: with ``PUT /fhir/{type}/{id}``
    definitions: DefinitionSource = field(default_factory=Definitions)
    #: the definitions read from files at start (a PUT may not shadow one)
    definition_files: Definitions = field(default_factory=Definitions)
    #: told about each newly stored feedback item (``app.cds.routes``)
    feedback_listeners: list[FeedbackListener] = field(default_factory=list)
    #: the worker threads ``$apply`` operations run in, apart from the shared pool: an
    #: operation waits there for the hook runs it makes, whose own thread steps need the shared
    #: pool free (``app.api.fhir``)
    apply_threads: CapacityLimiter = field(default_factory=lambda: CapacityLimiter(APPLY_THREADS))


#: How many ``$apply`` operations run at once (each in a worker thread of its own pool).
APPLY_THREADS = 8


@dataclass(kw_only=True)
class Container:
    """The service: what it was built with, and once started what it runs on."""

    settings: Settings
    adapters: Adapters
    metrics: Metrics
    #: set while the lifespan runs (None before it starts and after it stops)
    running: Running | None = None
    #: the periodic task, while it runs (None when its interval is 0)
    maintenance_task: asyncio.Task[None] | None = None


def container_of(app: Starlette) -> Container:
    """The container ``create_app`` put on ``app``."""
    container: Container = app.state.container
    return container


def running(app: Starlette) -> Running:
    """What ``app`` runs on; raises ``RuntimeError`` outside its lifespan."""
    parts = container_of(app).running
    if parts is None:
        raise RuntimeError("the service has not started: its lifespan builds its parts")
    return parts


#: The deployments to serve, loaded and verified against the tools the host offers.
DeploymentLoader = Callable[[ToolHost], Deployments]
#: A version built from a change, checked like the release against the host's tools.
Vetting = Callable[[Deployment, ToolHost], Deployment]


@asynccontextmanager
async def started(
    container: Container,
    *,
    deployments_of: DeploymentLoader,
    vet: Vetting,
) -> AsyncIterator[Running]:
    """Build the running parts of ``container`` (steps 1–4 above), yield them, close them."""
    settings = container.settings
    async with AsyncExitStack() as stack:
        tools = await run_in_threadpool(ToolHost.from_servers, settings.mcp_servers)
        stack.push_async_callback(run_in_threadpool, tools.close)
        # MCP sessions open before the first call; a server that is not there makes the
        # deployments that bind it unready, a binding that does not fit its tool refuses its
        # deployment (the others serve)
        deployments = await run_in_threadpool(deployments_of, tools)
        engine = make_engine(
            settings.database_url,
            connect_timeout=settings.database_connect_timeout_seconds,
            statement_timeout=settings.database_statement_timeout_seconds,
            pool_timeout=settings.database_pool_timeout_seconds,
        )
        stack.callback(engine.dispose)
        stack.callback(RunStore.of(engine).close)
        http = httpx.AsyncClient(timeout=settings.fhir_timeout_seconds, follow_redirects=False)
        stack.push_async_callback(http.aclose)
        catalog = Catalog(deployments, tools.packaged, vet=lambda d: vet(d, tools))
        try:  # the active version of each deployment, as every worker sees it
            deployments = await run_in_threadpool(catalog.refresh, engine)
        except SQLAlchemyError as exc:  # /readyz says what is wrong with the database
            log.error("cannot read the active deployment versions: %s", describe_error(exc))
        runner = Runner.from_settings(settings, tools=tools)
        probe = DatabaseProbe(engine)
        stack.callback(probe.close)
        _log_deployments(deployments)
        log.info("database %s", engine.url.render_as_string(hide_password=True))
        log_cors_origins(settings.cors_origins)
        running = await _hook_parts(
            stack,
            container,
            engine=engine,
            http=http,
            catalog=catalog,
            tools=tools,
            runner=runner,
            probe=probe,
        )
        await run_in_threadpool(freeze_startup_heap)
        yield running


async def _hook_parts(
    stack: AsyncExitStack,
    container: Container,
    *,
    engine: Engine,
    http: httpx.AsyncClient,
    catalog: Catalog,
    tools: ToolHost,
    runner: Runner,
    probe: DatabaseProbe,
) -> Running:
    """The hook service and what it shares with the run routes (step 4)."""
    settings, adapters = container.settings, container.adapters
    auth = build_authenticator(settings, engine=engine, http=http)
    auth.warn_if_open()
    if not settings.allowed_fhir_servers:
        log.warning(
            "fhirServer restriction is OFF (open mode): hook calls (fhirServer) and $apply calls "
            "(dataEndpoint) may make the service read from any FHIR server they name; set "
            "HORISMOS_ALLOWED_FHIR_SERVERS to restrict it"
        )
    if not settings.public_base_url:
        log.warning(
            "HORISMOS_PUBLIC_BASE_URL is not set: card links are built from each request's Host "
            "header, which the caller chooses; set it to the URL clients use"
        )
    # one blocking client for tool commits (they run in worker threads), shared by all calls:
    # building a client per call costs more than the rest of the hook
    commits_http = httpx.Client(follow_redirects=False, timeout=settings.fhir_timeout_seconds)
    stack.callback(commits_http.close)
    # renews the leases of the runs this process claims; a dead process's runs are taken over
    leases = LeaseKeeper(engine, lease=settings.run_lease_seconds)
    stack.callback(leases.close)
    # approved changes decide beside the active version, after the answer is stored
    shadow = ShadowRunner(engine, catalog, tools=runner.invoker)
    stack.callback(shadow.close)
    if catalog.current().serving:
        await run_in_threadpool(warm)
    package = _terminology(settings.terminology_packages)
    # the server HORISMOS_TERMINOLOGY_URL names, else the embedded terminology
    terminologies = TerminologyChoice(package, adapters.terminology_server(settings))
    stack.callback(terminologies.close)
    hooks = HookService(
        HookDeps(
            catalog=catalog,
            engine=engine,
            http=http,
            fhir_readers=adapters.fhir_readers,
            authenticator=auth,
            runner=runner,
            fhir_timeout=settings.fhir_timeout_seconds,
            allowed_fhir_servers=tuple(settings.allowed_fhir_servers),
            max_fhir_response_bytes=settings.max_fhir_response_bytes,
            max_fhir_pages=settings.max_fhir_pages,
            commit_handlers=adapters.commits(engine, commits_http),
            leases=leases,
            deadline=settings.hook_deadline_seconds,
            shadow=shadow,
            zone=settings.zone,
            terminology=package,
            terminologies=terminologies,
            answer_ahead_seconds=settings.answer_ahead_seconds,
        )
    )
    definitions = await run_in_threadpool(load_definitions, settings.definition_paths)
    if settings.definition_paths:
        log.info("definitions: %d from %s", len(definitions), settings.definition_paths)
    return Running(
        definitions=HeldDefinitions(files=definitions, engine=engine),
        definition_files=definitions,
        engine=engine,
        http=http,
        catalog=catalog,
        tool_host=tools,
        runner=runner,
        database_probe=probe,
        authenticator=auth,
        hooks=hooks,
        leases=leases,
        shadow=shadow,
    )


def _terminology(folder: Path | None) -> Terminology | None:
    """The terminology the service resolves code-system aliases with; without one installed
    (``horismos serve`` refuses to start, an embedded app in tests may) systems are read as
    written and a record coded by an alias is unread."""
    try:
        return load_terminology(folder)
    except TerminologyNotInstalled as exc:
        log.warning("%s: code-system aliases are not resolved", exc)
        return None


def _log_deployments(deployments: Deployments) -> None:
    for d in deployments:
        if d.serving:
            log.info("serving deployment %s %s (%s)", d.id, d.version, (d.digest or "")[:12])
        else:
            log.error(
                "deployment %s is NOT served: it does not verify (%d problem(s)): %s",
                d.id,
                len(d.problems),
                "; ".join(str(p) for p in d.problems[:5]),
            )


__all__ = ["Container", "Running", "container_of", "running", "started"]
