"""A JSON tool endpoint on loopback for `http:` binding tests (`python http_tool_server.py PORT`).

``/assign`` answers ``{"queueRef": …}``; ``/garbage`` adds an undeclared key; ``/broken`` answers
500; ``/refuse`` answers 400; ``/text`` answers non-JSON; every request body is echoed into
``/calls`` (GET) so tests can see what was sent.
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CALLS: list[dict[str, Any]] = []


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send(200, json.dumps(CALLS).encode())

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
        CALLS.append({"path": self.path, "body": body})
        if self.path == "/assign":
            self._send(200, json.dumps({"queueRef": f"Q-{body.get('queue')}"}).encode())
        elif self.path == "/ticket":
            self._send(200, json.dumps({"ticket": f"T-{int(body.get('score', 0))}"}).encode())
        elif self.path == "/garbage":
            self._send(200, json.dumps({"queueRef": "Q", "dropTables": True}).encode())
        elif self.path == "/broken":
            self._send(500, b"{}")
        elif self.path == "/refuse":
            self._send(400, b'{"error": "no"}')
        else:
            self._send(200, b"plain words", "text/plain")


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
