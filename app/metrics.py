"""Prometheus metrics: request counts and latency by route template, served on ``/metrics``.

Every label takes a bounded set of values (route templates, standard methods, status codes), so
the page's size does not depend on what callers send.

Each app gets its own registry (several apps in one test process must not collide); other
layers add their metrics to ``app.state.container.metrics.registry``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import generate_latest
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

UNMATCHED = "<unmatched>"
#: The methods metrics are labelled with; anything else is counted as ``OTHER``, so callers
#: cannot grow the (unauthenticated) /metrics page by inventing methods.
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
OTHER_METHOD = "OTHER"


@dataclass(frozen=True, kw_only=True)
class Metrics:
    registry: CollectorRegistry
    requests: Counter
    latency: Histogram


def make_metrics() -> Metrics:
    registry = CollectorRegistry(auto_describe=True)
    return Metrics(
        registry=registry,
        requests=Counter(
            "horismos_http_requests",
            "HTTP requests answered, by method, route template and status code.",
            ["method", "route", "status"],
            registry=registry,
        ),
        latency=Histogram(
            "horismos_http_request_duration_seconds",
            "Time to answer an HTTP request, by method and route template.",
            ["method", "route"],
            registry=registry,
        ),
    )


def _route_template(scope: Scope) -> str:
    """The matched route's path template (``/runs/{run_id}``), never the raw path."""
    matched = scope.get("route")
    if matched is not None and hasattr(matched, "path"):
        return str(matched.path)
    app = scope.get("app")
    router = getattr(app, "router", None)
    for route in getattr(router, "routes", ()):
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return str(getattr(route, "path", UNMATCHED))
    return UNMATCHED


class MetricsMiddleware:
    """Counts and times every HTTP request (pure ASGI: streaming responses pass through)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        started = time.perf_counter()

        async def send_and_record(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_and_record)
        finally:
            route = _route_template(scope)
            method = str(scope.get("method", ""))
            if method not in KNOWN_METHODS:
                method = OTHER_METHOD
            self.metrics.requests.labels(method, route, str(status)).inc()
            self.metrics.latency.labels(method, route).observe(time.perf_counter() - started)


router = APIRouter(tags=["operations"])


@router.get("/metrics", include_in_schema=False)
def metrics_endpoint(request: Request) -> Response:
    """The Prometheus text exposition of this process's metrics."""
    metrics: Metrics = request.app.state.container.metrics
    return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)
