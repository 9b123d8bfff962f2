"""A misbehaving HTTP server on loopback, for fault tests: slow, broken, hostile FHIR answers,
and a black hole (a TCP listener that accepts connections and never answers).

``RogueServer`` serves scripted answers by path: ``server.on("/fhir/Patient/p1", answer)``
where ``answer`` is an :class:`Answer` (status, headers, body or body chunks, a delay before
answering) or a callable building one from the request path. Every request is recorded
(``server.seen``). A delay waits on an event that ``close()`` sets, so no test waits out a
server that is already being torn down.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Answer:
    """What the server sends for one request."""

    status: int = 200
    body: bytes | Iterable[bytes] = b""
    headers: dict[str, str] = field(default_factory=dict)
    #: seconds to wait before answering (cut short when the server closes)
    delay: float = 0.0

    @classmethod
    def json(cls, value: Any, status: int = 200, **kw: Any) -> Answer:
        raw = value if isinstance(value, str) else json.dumps(value)
        headers = {"content-type": "application/fhir+json", **kw.pop("headers", {})}
        return cls(status=status, body=raw.encode(), headers=headers, **kw)


Responder = Answer | Callable[[str], Answer]


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]


class RogueServer:
    """A threaded HTTP/1.1 server on 127.0.0.1 answering what each test scripts."""

    def __init__(self) -> None:
        self.routes: dict[str, Responder] = {}
        self.seen: list[Seen] = []
        self.closing = threading.Event()
        rogue = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                rogue._serve(self)

            do_PUT = do_POST = do_GET

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def on(self, path: str, answer: Responder) -> None:
        """Answer requests whose path (without query) is ``path``."""
        self.routes[path] = answer

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        path = handler.path.split("?", 1)[0]
        self.seen.append(Seen(handler.command, handler.path, dict(handler.headers.items())))
        length = int(handler.headers.get("content-length") or 0)
        if length:
            handler.rfile.read(length)
        responder = self.routes.get(path)
        answer = (
            Answer.json({"resourceType": "OperationOutcome", "issue": []}, status=404)
            if responder is None
            else responder(handler.path)
            if callable(responder)
            else responder
        )
        if answer.delay and self.closing.wait(answer.delay):
            return
        handler.send_response(answer.status)
        chunks: Iterator[bytes] | None = None
        if isinstance(answer.body, bytes):
            handler.send_header("content-length", str(len(answer.body)))
        else:
            chunks = iter(answer.body)
            handler.send_header("transfer-encoding", "chunked")
        for name, value in answer.headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        try:
            if chunks is None:
                assert isinstance(answer.body, bytes)
                handler.wfile.write(answer.body)
                return
            for chunk in chunks:
                if self.closing.is_set():
                    return
                handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            handler.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            return  # the client gave up reading: that is what a limit is for

    def close(self) -> None:
        self.closing.set()
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def rogue_server() -> Iterator[RogueServer]:
    server = RogueServer()
    try:
        yield server
    finally:
        server.close()


class BlackHole:
    """A TCP listener that accepts every connection and never sends a byte: a hung peer
    (a database or FHIR server whose process stopped answering)."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(256)
        self._accepted: list[socket.socket] = []
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    @property
    def connections(self) -> int:
        return len(self._accepted)

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self._accepted.append(conn)  # kept open, never read, never answered

    def close(self) -> None:
        self._closing.set()
        with contextlib.suppress(OSError):  # shutting down wakes the thread in accept()
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        for conn in self._accepted:
            conn.close()


@contextmanager
def black_hole() -> Iterator[BlackHole]:
    hole = BlackHole()
    try:
        yield hole
    finally:
        hole.close()
