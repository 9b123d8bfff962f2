"""A loopback proxy in front of the FHIR server that holds writes in flight, for crash tests.

While ``holding`` is set, a write (PUT, PATCH, POST) is held without an answer: for a path in
``land_first`` it is forwarded to the FHIR server first (the write lands, its answer never comes
back), for any other path it is never forwarded (the write is lost on the way). Held requests
stay held until the proxy closes: a request in flight when the service was killed never
completes. Once ``holding`` is cleared, new writes pass through with their answers. GETs always
pass through.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx


@dataclass
class HoldingProxy:
    origin: str
    land_first: set[str] = field(default_factory=set)
    holding: threading.Event = field(default_factory=threading.Event)
    closing: threading.Event = field(default_factory=threading.Event)
    #: paths of the writes received, and of those forwarded to the FHIR server
    received: list[str] = field(default_factory=list)
    forwarded: list[str] = field(default_factory=list)
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def wait_for_writes(self, n: int, timeout: float) -> bool:
        """Whether ``n`` writes have arrived within ``timeout`` seconds."""
        with self._changed:
            return self._changed.wait_for(lambda: len(self.received) >= n, timeout)

    def _note(self, into: list[str], path: str) -> None:
        with self._changed:
            into.append(path)
            self._changed.notify_all()


def _handler(upstream: str, proxy: HoldingProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self, body: bytes | None) -> httpx.Response:
            headers = {
                k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")
            }
            return httpx.request(
                self.command, upstream + self.path, content=body, headers=headers, timeout=10
            )

        def _answer(self, response: httpx.Response) -> None:
            self.send_response(response.status_code)
            for key in ("content-type", "etag"):
                if key in response.headers:
                    self.send_header(key, response.headers[key])
            self.send_header("content-length", str(len(response.content)))
            self.end_headers()
            self.wfile.write(response.content)

        def do_GET(self) -> None:
            self._answer(self._forward(None))

        def do_PUT(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else None
            path = self.path.split("?", 1)[0]
            proxy._note(proxy.received, path)
            if not proxy.holding.is_set():
                proxy._note(proxy.forwarded, path)
                self._answer(self._forward(body))
                return
            if path in proxy.land_first:
                self._forward(body)
                proxy._note(proxy.forwarded, path)
            proxy.closing.wait()  # held: no answer, ever
            self.close_connection = True

        do_PATCH = do_POST = do_PUT

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


@contextmanager
def holding_proxy(upstream_origin: str) -> Iterator[HoldingProxy]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    proxy = HoldingProxy(origin=f"http://127.0.0.1:{server.server_address[1]}")
    server.RequestHandlerClass = _handler(upstream_origin, proxy)
    server.daemon_threads = True
    proxy.holding.set()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.closing.set()
        server.shutdown()
        server.server_close()
