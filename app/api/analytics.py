"""``GET /analytics``: which cards clinicians accept and which they override, and why.

Per service, card and rule: how often cards fired, were accepted, were overridden (by reason),
and the same per day over the window asked for; and, for a change in shadow mode, its agreement
with the active version on the service's runs of that window. JSON for programs; an HTML page (a
Jinja2 template, autoescaped) when ``Accept`` ranks ``text/html`` first. It reads only what the
store recorded (``app.store.analytics``); the counting is ``app.cds.analytics``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response
from fastapi.templating import Jinja2Templates

from app.api.negotiation import PAGE_HEADERS, prefers_html
from app.api.pages import ENV
from app.cds.analytics import Labels, build_report
from app.cds.auth import CLIENT_JWT_RESPONSE, ClientIdentity, require_client
from app.container import running
from app.deps import SessionDep
from app.store.analytics import feedback_since, issued_since, shadow_since

router = APIRouter(tags=["analytics"], responses=CLIENT_JWT_RESPONSE)

#: The longest window one report covers, in days.
MAX_DAYS = 366

_TEMPLATES = Jinja2Templates(env=ENV)


@router.get(
    "/analytics",
    summary="Per service, card and rule: cards fired, accepted, overridden by reason, per day; "
    "shadow-mode agreement",
    response_model=None,
    responses={
        200: {
            "description": "The report (JSON), or its page when `Accept` ranks `text/html` "
            "above `application/json`",
            "content": {"text/html": {"schema": {"type": "string"}}},
        }
    },
)
def analytics(
    request: Request,
    session: SessionDep,
    _caller: Annotated[ClientIdentity | None, Depends(require_client)],
    days: Annotated[int, Query(ge=1, le=MAX_DAYS, description="The window, in days")] = 30,
    service: Annotated[str | None, Query(max_length=200, description="One service")] = None,
) -> Response:
    until = datetime.now(UTC)
    since = until - timedelta(days=days)
    deployments = running(request.app).catalog.current()  # labels only: no fresh read needed
    report = build_report(
        issued_since(session, since, service_id=service),
        feedback_since(session, since, service_id=service),
        labels=Labels.of(deployments),
        since=since,
        until=until,
        shadow=shadow_since(session, since, service_id=service),
    )
    if not prefers_html(request.headers.get("accept")):
        return JSONResponse(report, headers={"Vary": "Accept"})
    context: dict[str, Any] = {"report": report, "days": days, "service": service}
    return _TEMPLATES.TemplateResponse(request, "analytics.html", context, headers=PAGE_HEADERS)
