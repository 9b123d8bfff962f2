"""Typed tools (docs/tools.md): bindings, invocation under timeouts, adapter schemes.

Importing this package does no network I/O and imports neither httpx nor the MCP SDK; those
load when an ``http(s):`` or ``mcp://`` tool is first called.
"""

from __future__ import annotations

from app.tools.call import ToolCall
from app.tools.errors import AdapterUnavailable, ToolError, ToolLoadError
from app.tools.invoker import (
    SchemeHandler,
    ToolInvoker,
    ToolRegistry,
    scheme_of,
    tool_aware,
)

__all__ = [
    "AdapterUnavailable",
    "SchemeHandler",
    "ToolCall",
    "ToolError",
    "ToolInvoker",
    "ToolLoadError",
    "ToolRegistry",
    "scheme_of",
    "tool_aware",
]
