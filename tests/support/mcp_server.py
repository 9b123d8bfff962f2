"""A real MCP server (the ``mcp`` SDK's) for binding tests, over stdio or streamable HTTP.

    python -m tests.support.mcp_server http PORT
    python -m tests.support.mcp_server stdio

Its tools are deliberately looser (or stricter) than the contracts the tests declare, so
narrowing and the load-time schema check show. With ``MCP_TEST_LOG=FILE`` in its environment the
server appends one JSON line per event (``start``, ``list``, ``call`` with the arguments it
received), each with its process id: tests read what reached the server, and how many sessions
and processes there were.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Literal

from mcp.server.mcpserver import MCPServer

_LOG = os.environ.get("MCP_TEST_LOG")


def _event(kind: str, **data: Any) -> None:
    if _LOG:
        with open(_LOG, "a", encoding="utf-8") as log:
            log.write(json.dumps({"event": kind, "pid": os.getpid(), **data}) + "\n")


class _LoggingServer(MCPServer):
    async def list_tools(self) -> Any:
        _event("list")
        return await super().list_tools()


server = _LoggingServer("horismos-test-tools")


@server.tool()
def assign_queue(patient: str, queue: str, note: str = "") -> dict[str, Any]:
    """Accepts an optional note the declared contract does not know about."""
    _event("call", tool="assign_queue", args={"patient": patient, "queue": queue, "note": note})
    return {"queueRef": f"Q-{patient}-{queue}", "echoNote": note}


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
    _event("call", tool="issue_ticket", args={"case": case, "score": score, "priority": priority})
    return {"ticket": "T-5" if priority == "normal" else "T-6"}


@server.tool()
def issue_ticket_loose(case: str, score: float) -> dict[str, Any]:
    """Answers more than the declared effect: the extra key must not land."""
    return {"ticket": "T-7", "internalNote": "not in any contract"}


# --- for the ticketing contract (case: Case, score: decimal, severity: Severity) -------------


@server.tool()
def ticket(
    case: str, score: float, severity: Literal["Major", "Minor"], urgent: bool = False
) -> dict[str, Any]:
    """Fits the contract; offers an ``urgent`` flag the contract does not send."""
    args = {"case": case, "score": score, "severity": severity, "urgent": urgent}
    _event("call", tool="ticket", args=args)
    return {"ticket": f"T-{int(score)}"}


@server.tool()
def ticket_whole_scores(case: str, score: int, severity: str) -> dict[str, Any]:
    """Takes whole numbers only: the contract sends decimals."""
    return {"ticket": f"T-{score}"}


@server.tool()
def ticket_major_only(case: str, score: float, severity: Literal["Major"]) -> dict[str, Any]:
    """Knows one severity of the two the contract may send."""
    return {"ticket": "T-1"}


@server.tool()
def ticket_chatty(case: str, score: float, severity: str) -> dict[str, Any]:
    """Answers a key the contract does not declare, next to the one it does."""
    _event("call", tool="ticket_chatty", args={"case": case, "score": score})
    return {"ticket": f"T-{int(score)}", "internalNote": "for the queue owner only"}


@server.tool()
def ticket_slow(case: str, score: float, severity: str) -> dict[str, Any]:
    """Answers after five seconds: longer than the contract's deadline."""
    time.sleep(5)
    return {"ticket": "T-9"}


@server.tool()
def ticket_then_die(case: str, score: float, severity: str) -> dict[str, Any]:
    """The server process dies in the middle of the call."""
    _event("call", tool="ticket_then_die", args={"case": case})
    time.sleep(0.2)
    os._exit(3)


if __name__ == "__main__":
    _event("start")
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
