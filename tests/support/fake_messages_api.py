"""A fake Anthropic Messages API on loopback: a real HTTP server in a thread.

It records every request body and answers ``POST /v1/messages`` with the next scripted reply:
``{"tool_input": {...}}`` becomes a ``tool_use`` block for the tool the request forced;
``{"status": 500, "body": {...}}`` becomes an error response; ``{"delay": seconds}`` before the
reply makes the SDK's timeout fire (the test sets the Bridge's timeout below it).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class FakeMessagesApi:
    base_url: str
    replies: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)


@contextmanager
def fake_messages_api() -> Iterator[FakeMessagesApi]:
    state = FakeMessagesApi(base_url="")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            state.requests.append({"path": self.path, "body": body})
            reply: dict[str, Any] = (
                state.replies.pop(0) if state.replies else {"status": 500, "body": {}}
            )
            if reply.get("hang"):
                # Held until the test releases it (after the client has given up).
                state.release.wait(30)
                return
            status = int(reply.get("status", 200))
            if status != 200:
                payload: dict[str, Any] = reply.get("body") or {
                    "type": "error",
                    "error": {"type": "api_error", "message": "scripted failure"},
                }
            else:
                forced = body.get("tool_choice", {}).get("name", "tool")
                content: list[dict[str, Any]] = []
                if "text" in reply:
                    content.append({"type": "text", "text": reply["text"]})
                if "tool_input" in reply:
                    content.append(
                        {
                            "type": "tool_use",
                            "id": f"toolu_{len(state.requests)}",
                            "name": reply.get("tool_name", forced),
                            "input": reply["tool_input"],
                        }
                    )
                payload = {
                    "id": f"msg_{len(state.requests)}",
                    "type": "message",
                    "role": "assistant",
                    "model": body.get("model", "fake"),
                    "content": content,
                    "stop_reason": "tool_use",
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 10},
                }
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
        thread.join()
