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


@server.tool()
def issue_ticket(case: str, score: float, priority: str = "normal") -> dict[str, Any]:
    """Accepts an undeclared optional priority; answers exactly the declared effect key."""
    return {"ticket": "T-5" if priority == "normal" else "T-6"}


@server.tool()
def issue_ticket_loose(case: str, score: float) -> dict[str, Any]:
    """Answers more than the declared effect: the extra key must not land."""
    return {"ticket": "T-7", "internalNote": "not in any contract"}


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
