"""A loopback HTTP proxy in front of the FHIR server that can lose the answers to writes.

With ``drop_writes`` it reproduces "connection lost after sending": the FHIR server applies the
PUT, PATCH or POST, the client never learns the outcome (``drop_first=N``: only the first N
writes lose their answer, later ones pass, as when a retry reaches a server that is back). GETs
(and, without ``drop_writes``, writes) pass through with their answers. Restarting it on the same
port plays "the server is back".
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

_ANSWER_HEADERS = ("content-type", "etag", "location")


def _handler(
    upstream: str, forwarded: list[str], drop: bool, drop_first: int | None
) -> type[BaseHTTPRequestHandler]:
    lock = threading.Lock()

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
            self._answer(self._forward())

        def _answer(self, response: httpx.Response) -> None:
            self.send_response(response.status_code)
            for key in _ANSWER_HEADERS:
                if key in response.headers:
                    self.send_header(key, response.headers[key])
            self.send_header("content-length", str(len(response.content)))
            self.end_headers()
            self.wfile.write(response.content)

        def _write(self) -> None:
            response = self._forward()
            with lock:
                forwarded.append(self.path)
                lose = drop and (drop_first is None or len(forwarded) <= drop_first)
            if lose:
                self.close_connection = True  # no status line, no body: the answer is lost
            else:
                self._answer(response)

        do_PUT = do_POST = do_PATCH = _write

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


@contextmanager
def dropping_proxy(
    upstream_origin: str,
    *,
    drop_writes: bool = True,
    drop_first: int | None = None,
    port: int = 0,
) -> Iterator[tuple[str, list[str]]]:
    """Yield ``(proxy origin, paths of the writes forwarded)``."""
    forwarded: list[str] = []
    handler = _handler(upstream_origin, forwarded, drop_writes, drop_first)
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", forwarded
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
