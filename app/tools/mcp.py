"""``mcp://server/tool`` bindings through the MCP SDK (streamable HTTP).

The declaration wins over the server's own schema (seeds/07): the server's tool must accept every
declared argument and require nothing the contract does not supply, only the declared arguments
are sent, and the result (structured content, or a JSON object in the first text block) is
handed back for effect validation, where undeclared keys are refused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from app.tools.errors import ToolError
from app.tools.invoker import ToolCall


def parse_binding(binding: str) -> tuple[str, str]:
    """``mcp://ehr-server/assign_queue`` → ``("ehr-server", "assign_queue")``."""
    parts = urlsplit(binding)
    tool = parts.path.strip("/")
    if parts.scheme != "mcp" or not parts.netloc or not tool:
        raise ToolError(f"{binding!r} is not mcp://server/tool")
    return parts.netloc, tool


def narrow(call: ToolCall, server_schema: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments to send: exactly the declared ones, if the server's schema admits them."""
    declared = {a.name for a in call.tool.args}
    properties = server_schema.get("properties") or {}
    required = set(server_schema.get("required") or [])
    missing_there = sorted(declared - set(properties)) if properties else []
    if missing_there:
        raise ToolError(
            f"the MCP tool does not accept the declared argument(s) {missing_there}",
            kind="contract",
        )
    missing_here = sorted(required - declared)
    if missing_here:
        raise ToolError(
            f"the MCP tool requires {missing_here}, which the declared contract does not supply",
            kind="contract",
        )
    return {k: v for k, v in call.args.items() if k in declared}


async def call_mcp_tool(call: ToolCall, servers: Mapping[str, str]) -> Any:
    from mcp import Client

    server, name = parse_binding(call.tool.binding)
    url = servers.get(server)
    if url is None:
        raise ToolError(f"no URL is configured for MCP server {server!r}")
    async with Client(url, read_timeout_seconds=call.timeout) as client:
        listing = await client.list_tools()
        found = next((t for t in listing.tools if t.name == name), None)
        if found is None:
            raise ToolError(f"MCP server {server!r} has no tool {name!r}")
        arguments = narrow(call, found.input_schema)
        result = await client.call_tool(name, arguments)
    if result.is_error:
        text = " ".join(getattr(c, "text", "") for c in result.content)
        raise ToolError(f"MCP tool {name!r} failed: {text}".strip(), retryable=True)
    if isinstance(result.structured_content, dict):
        return result.structured_content
    for block in result.content:
        block_text = getattr(block, "text", None)
        if isinstance(block_text, str):
            try:
                return json.loads(block_text)
            except json.JSONDecodeError as exc:
                raise ToolError(f"MCP tool {name!r} did not answer JSON", kind="contract") from exc
    raise ToolError(f"MCP tool {name!r} returned no result", kind="contract")
