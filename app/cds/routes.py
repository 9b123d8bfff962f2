"""The CDS Hooks HTTP surface: discovery, hook calls and feedback. Thin: parse, call, answer."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from app import json_input
from app.cds.auth import called_url, client_authenticator
from app.cds.discovery import discovery
from app.cds.errors import PayloadTooLarge, RequestInvalid, UnsupportedMediaType
from app.cds.feedback import FeedbackListener, store_feedback
from app.cds.leases import LeaseKeeper
from app.cds.schemas import (
    FEEDBACK_REQUEST_BODY,
    HOOK_REQUEST_BODY,
    CdsResponse,
    Discovery,
    FeedbackResult,
    error_responses,
)
from app.cds.service import HookDeps, HookService
from app.changes.shadow import ShadowRunner
from app.deps import DeploymentsDep, app_runner, is_json_media_type
from app.ports import Adapters
from app.settings import Settings
from app.terminology import Terminology, TerminologyNotInstalled, load_terminology
from app.terminology.choice import TerminologyChoice
from app.ucum import warm

log = logging.getLogger("horismos.cds")


def _terminology(folder: Path | None) -> Terminology | None:
    """The terminology the service resolves code-system aliases with; without one installed
    (``horismos serve`` refuses to start, an embedded app in tests may) systems are read as
    written and a record coded by an alias is unread."""
    try:
        return load_terminology(folder)
    except TerminologyNotInstalled as exc:
        log.warning("%s: code-system aliases are not resolved", exc)
        return None


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Build the hook service once the app's engine, HTTP client and ontology exist."""
    settings: Settings = app.state.settings
    adapters: Adapters = app.state.adapters
    auth = client_authenticator(app)  # shared with the run routes (app.cds.auth.require_client)
    auth.warn_if_open()
    if not settings.allowed_fhir_servers:
        log.warning(
            "fhirServer restriction is OFF (open mode): hook calls may make the service read "
            "from any FHIR server they name; set HORISMOS_ALLOWED_FHIR_SERVERS to restrict it"
        )
    if not settings.public_base_url:
        log.warning(
            "HORISMOS_PUBLIC_BASE_URL is not set: card links are built from each request's Host "
            "header, which the caller chooses; set it to the URL clients use"
        )
    app.state.cds_feedback_listeners = []
    # one blocking client for tool commits (they run in worker threads), shared by all calls:
    # building a client per call costs more than the rest of the hook
    commits_http = httpx.Client(follow_redirects=False, timeout=settings.fhir_timeout_seconds)
    # renews the leases of the runs this process claims; a dead process's runs are taken over
    leases = LeaseKeeper(app.state.engine, lease=settings.run_lease_seconds)
    app.state.run_leases = leases
    # approved changes decide beside the active version, after the answer is stored
    shadow = ShadowRunner(app.state.engine, app.state.catalog, tools=app_runner(app.state).invoker)
    app.state.shadow = shadow
    if app.state.catalog.current().serving:
        await run_in_threadpool(warm)
    app.state.cds = HookService(
        HookDeps(
            catalog=app.state.catalog,
            engine=app.state.engine,
            http=app.state.http,
            fhir_readers=adapters.fhir_readers,
            authenticator=auth,
            runner=app_runner(app.state),
            fhir_timeout=settings.fhir_timeout_seconds,
            allowed_fhir_servers=tuple(settings.allowed_fhir_servers),
            max_fhir_response_bytes=settings.max_fhir_response_bytes,
            max_fhir_pages=settings.max_fhir_pages,
            commit_handlers=adapters.commits(app.state.engine, commits_http),
            leases=leases,
            deadline=settings.hook_deadline_seconds,
            shadow=shadow,
            zone=settings.zone,
            terminology=(package := _terminology(settings.terminology_packages)),
            # the server HORISMOS_TERMINOLOGY_URL names, else the embedded terminology
            terminologies=TerminologyChoice(package, adapters.terminology_server(settings)),
            answer_ahead_seconds=settings.answer_ahead_seconds,
        )
    )
    try:
        yield
    finally:
        leases.close()
        shadow.close()
        commits_http.close()


def add_feedback_listener(app: FastAPI, listener: FeedbackListener) -> None:
    """Be told about each newly stored feedback item (e.g. to reconcile accepted suggestions)."""
    app.state.cds_feedback_listeners.append(listener)


router = APIRouter(tags=["CDS Hooks"], lifespan=lifespan)


async def _json(request: Request) -> Any:
    """The body as JSON the service can walk and store: declared as JSON (else 415), within
    the size limit (else 413), not nested absurdly deep and free of characters no database
    stores (else 400 naming where)."""
    if not is_json_media_type(request.headers.get("content-type")):
        raise UnsupportedMediaType.one(
            "not-supported",
            "the body must be sent with Content-Type: application/json",
            "Content-Type",
        )
    raw = await _bounded_body(request)
    try:
        return json_input.loads(raw)
    except json_input.JsonRefused as exc:
        raise RequestInvalid.one("structure", exc.message, exc.where or None) from None
    except ValueError:
        raise RequestInvalid.one("structure", "the body is not valid JSON") from None


def _too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge.one("too-costly", f"the request body exceeds {limit} bytes")


async def _bounded_body(request: Request) -> bytes:
    """The body, read no further than ``settings.max_request_bytes`` (else 413)."""
    limit = int(request.app.state.settings.max_request_bytes)
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _public_url(request: Request) -> tuple[str, str]:
    """(the URL that was called, the service's base URL) as the client sees them."""
    return called_url(request)


@router.get(
    "/cds-services",
    summary="CDS Hooks discovery: the services of the deployments that are served",
    response_model=Discovery,
    response_model_exclude_none=True,
)
def get_services(deployments: DeploymentsDep) -> dict[str, Any]:
    return discovery(deployments)


@router.post(
    "/cds-services/{service_id}",
    summary="Call a CDS service (CDS Hooks 2.0 hook request)",
    openapi_extra=HOOK_REQUEST_BODY,
    responses={
        200: {"model": CdsResponse, "description": "Cards, and the run that produced them"},
        **error_responses(400, 401, 404, 409, 412, 413, 415, 500, 503),
    },
)
async def call_service(service_id: str, request: Request) -> JSONResponse:
    # No dependency injection on the hot path: a plain (sync) dependency is run in the threadpool,
    # a thread hand-off per call, and resolving it cost more CPU than what it checks.
    service: HookService = request.app.state.cds
    audience, base = _public_url(request)
    body = await _json(request)
    response = await service.call(
        service_id,
        body,
        authorization=request.headers.get("authorization"),
        audience=audience,
        base_url=base,
    )
    # after the answer is sent: an order-select call's order-sign answers computed ahead
    job = service.ahead_job(service_id, body, audience=audience, base_url=base)
    return JSONResponse(response, background=BackgroundTask(job) if job is not None else None)


@router.post(
    "/cds-services/{service_id}/feedback",
    summary="Feedback on cards a service returned (accepted or overridden)",
    openapi_extra=FEEDBACK_REQUEST_BODY,
    responses={
        200: {"model": FeedbackResult, "description": "Stored; duplicates are counted, not errors"},
        **error_responses(400, 401, 404, 413, 415, 503),
    },
)
async def post_feedback(
    service_id: str, request: Request, deployments: DeploymentsDep
) -> JSONResponse:
    service: HookService = request.app.state.cds
    audience, _base = _public_url(request)
    await service.deps.authenticator.verify(request.headers.get("authorization"), audience)
    body = await _json(request)
    result = await run_in_threadpool(
        lambda: store_feedback(
            services={s for d in deployments for s in d.services},
            engine=request.app.state.engine,
            service_id=service_id,
            body=body,
            listeners=request.app.state.cds_feedback_listeners,
        )
    )
    return JSONResponse(result)
