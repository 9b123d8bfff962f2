"""A real MCP server (streamable HTTP) for binding tests: `python -m tests.support.mcp_server PORT`.

Its tools are deliberately looser than the contracts the tests declare, so narrowing shows.
"""

from __future__ import annotations

import sys
from typing import Any

from mcp.server.mcpserver import MCPServer

server = MCPServer("horismos-test-tools")
CALLS: list[dict[str, Any]] = []


@server.tool()
def assign_queue(patient: str, queue: str, note: str = "") -> dict[str, Any]:
    """Accepts an optional note the declared contract does not know about."""
    return {"queueRef": f"Q-{patient}-{queue}", "echoNote": note}


@server.tool()
def assign_queue_clean(patient: str, queue: str) -> dict[str, Any]:
    return {"queueRef": f"Q-{patient}-{queue}"}


@server.tool()
def needs_secret(patient: str, queue: str, secret: str) -> dict[str, Any]:
    """Requires an argument no declared contract supplies."""
    return {"queueRef": secret}


@server.tool()
def fails(patient: str) -> dict[str, Any]:
    raise RuntimeError("the queue service is down")


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
