"""The API documentation pages (``/docs``: Swagger UI, ``/redoc``: ReDoc) for networks without
Internet access.

Their scripts, styles and icon come from the service itself (the fastapi-offline package ships
them; ``create_app`` builds the app with it), and a Content-Security-Policy tells the browser to
fetch nothing from anywhere else: the ReDoc bundle names a branding image on a CDN, which the
browser then never requests.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Where the pages' scripts, styles and icon are served.
DOCS_ASSETS_PATH = "/docs/assets"

_PAGES = frozenset({"/docs", "/redoc", "/docs/oauth2-redirect"})

# the pages' own bootstrap scripts and the bundles' styles are inline; ReDoc's search runs in a
# worker it starts from a blob: URL
_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; "
    "frame-ancestors 'self'"
)


class DocsPolicyMiddleware:
    """Adds the documentation pages' Content-Security-Policy to their answers."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] not in _PAGES:
            await self.app(scope, receive, send)
            return

        async def with_policy(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((b"content-security-policy", _POLICY.encode("ascii")))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_policy)
