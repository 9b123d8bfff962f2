"""A loopback HTTP proxy that forwards writes to the FHIR server and then hangs up unanswered.

It reproduces "connection lost after sending": the FHIR server applies the PUT, the client never
learns the outcome. GETs pass through with their answers.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx


def _handler(upstream: str, forwarded: list[str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _forward(self) -> httpx.Response:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {
                k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")
            }
            return httpx.request(
                self.command, upstream + self.path, content=body, headers=headers, timeout=10
            )

        def do_GET(self) -> None:
            response = self._forward()
            self.send_response(response.status_code)
            for key in ("content-type", "etag"):
                if key in response.headers:
                    self.send_header(key, response.headers[key])
            self.send_header("content-length", str(len(response.content)))
            self.end_headers()
            self.wfile.write(response.content)

        def do_PUT(self) -> None:
            self._forward()
            forwarded.append(self.path)
            self.close_connection = True  # no status line, no body: the answer is lost

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


@contextmanager
def dropping_proxy(upstream_origin: str) -> Iterator[tuple[str, list[str]]]:
    """Yield ``(proxy origin, paths of the PUTs forwarded and left unanswered)``."""
    forwarded: list[str] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(upstream_origin, forwarded))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", forwarded
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
