"""The CDS Hooks HTTP surface: discovery, hook calls and feedback. Thin: parse, call, answer."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from app import json_input
from app.cds.auth import called_url
from app.cds.discovery import discovery, individual_discovery
from app.cds.errors import PayloadTooLarge, RequestInvalid, UnsupportedMediaType
from app.cds.feedback import FeedbackListener, store_feedback
from app.cds.schemas import (
    FEEDBACK_REQUEST_BODY,
    HOOK_REQUEST_BODY,
    CdsResponse,
    Discovery,
    FeedbackResult,
    error_responses,
)
from app.container import container_of, running
from app.deps import DeploymentsDep, is_json_media_type

log = logging.getLogger("horismos.cds")


def add_feedback_listener(app: FastAPI, listener: FeedbackListener) -> None:
    """Be told about each newly stored feedback item (e.g. to reconcile accepted suggestions)."""
    running(app).feedback_listeners.append(listener)


router = APIRouter(tags=["CDS Hooks"])


async def read_json_body(request: Request) -> Any:
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
    limit = int(container_of(request.app).settings.max_request_bytes)
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


@router.get(
    "/individual/cds-services",
    summary="CDS Hooks discovery: every service on its own, none combined",
    response_model=Discovery,
    response_model_exclude_none=True,
)
def get_individual_services(deployments: DeploymentsDep) -> dict[str, Any]:
    return individual_discovery(deployments)


#: the OpenAPI description a hook call's routes share
_CALL_DOC: dict[str, Any] = {
    "openapi_extra": HOOK_REQUEST_BODY,
    "responses": {
        200: {"model": CdsResponse, "description": "Cards, and the run that produced them"},
        **error_responses(400, 401, 404, 409, 412, 413, 415, 500, 503),
    },
}
#: the OpenAPI description the feedback routes share
_FEEDBACK_DOC: dict[str, Any] = {
    "openapi_extra": FEEDBACK_REQUEST_BODY,
    "responses": {
        200: {"model": FeedbackResult, "description": "Stored; duplicates are counted, not errors"},
        **error_responses(400, 401, 404, 413, 415, 503),
    },
}


@router.post(
    "/individual/cds-services/{service_id}",
    summary="Call a CDS service listed by the individual discovery document",
    **_CALL_DOC,
)
@router.post(
    "/cds-services/{service_id}",
    summary="Call a CDS service (CDS Hooks 2.0 hook request)",
    **_CALL_DOC,
)
async def call_service(service_id: str, request: Request) -> JSONResponse:
    # No dependency injection on the hot path: a plain (sync) dependency is run in the threadpool,
    # a thread hand-off per call, and resolving it cost more CPU than what it checks.
    service = running(request.app).hooks
    audience, base = _public_url(request)
    body = await read_json_body(request)
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
    "/individual/cds-services/{service_id}/feedback",
    summary="Feedback on cards a service listed by the individual discovery document returned",
    **_FEEDBACK_DOC,
)
@router.post(
    "/cds-services/{service_id}/feedback",
    summary="Feedback on cards a service returned (accepted or overridden)",
    **_FEEDBACK_DOC,
)
async def post_feedback(
    service_id: str, request: Request, deployments: DeploymentsDep
) -> JSONResponse:
    parts = running(request.app)
    audience, _base = _public_url(request)
    await parts.authenticator.verify(request.headers.get("authorization"), audience)
    body = await read_json_body(request)
    result = await run_in_threadpool(
        lambda: store_feedback(
            services={s for d in deployments for s in d.services},
            engine=parts.engine,
            service_id=service_id,
            body=body,
            listeners=parts.feedback_listeners,
            members={c.id: c.members for c, _d in deployments.combined()},
        )
    )
    return JSONResponse(result)
