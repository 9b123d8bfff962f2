"""Which browser origins may call the service (``HORISMOS_CORS_ORIGINS``), said where an
integrator looks: one line at start, and one line when a browser origin is refused.

Without it a browser-based client (the CDS Hooks Sandbox) that is not allowed fails with
nothing in the service's log but ``OPTIONS … 405`` (no CORS configured) or a bare 400 from the
preflight: the browser says "CORS" and the service says nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger("horismos.cors")

#: Refused origins logged per process: each once, so a page polling the service does not fill
#: the log, and no more than this many, so a hostile stream of made-up origins cannot either.
_MAX_LOGGED = 100


def _origin(url: str) -> str:
    """``scheme://host[:port]`` of a URL."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def log_cors_origins(origins: Sequence[str]) -> None:
    """The start line: the origins browsers may call from, or that none may."""
    if origins:
        log.info("CORS: browser clients may call from %s", ", ".join(origins))
    else:
        log.info(
            "CORS: no browser origin is allowed (HORISMOS_CORS_ORIGINS is empty): a "
            "browser-based client such as the CDS Hooks Sandbox is refused; set "
            "HORISMOS_CORS_ORIGINS to its origin (e.g. https://sandbox.cds-hooks.org)"
        )


class CorsRefusalLog:
    """ASGI middleware: logs a request whose ``Origin`` is another site's and is not allowed
    (the browser will not let that page read the answer), then passes it on unchanged."""

    def __init__(
        self, app: ASGIApp, *, origins: Sequence[str], public_base_url: str | None = None
    ) -> None:
        self.app = app
        self.origins = frozenset(origins)
        #: the service's own origin as clients see it (behind a proxy the request's scheme and
        #: host may differ): its pages calling it are no cross-origin requests
        self.public = _origin(public_base_url) if public_base_url else None
        self._logged: set[str] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self._check(scope)
        await self.app(scope, receive, send)

    def _check(self, scope: Scope) -> None:
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        if origin is None or "*" in self.origins or origin in self.origins:
            return
        own = f"{scope.get('scheme', 'http')}://{headers.get('host', '')}"
        if origin in (own, self.public) or origin in self._logged:
            return
        if len(self._logged) >= _MAX_LOGGED:
            return
        self._logged.add(origin)
        preflight = scope["method"] == "OPTIONS" and "access-control-request-method" in headers
        log.warning(
            "CORS: refused a browser %s from origin %s (%s %s): it is not in "
            "HORISMOS_CORS_ORIGINS (%s); add it there to let that client call the service",
            "preflight" if preflight else "request",
            origin,
            headers.get("access-control-request-method", scope["method"])
            if preflight
            else scope["method"],
            scope.get("path", ""),
            ", ".join(sorted(self.origins)) or "empty",
        )
