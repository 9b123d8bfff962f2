"""``ToolCall``: one invocation of a tool, as a tool-aware callable or a scheme handler sees it.

Its own module so that what handles a call (the invoker, the MCP pool, adapters) can name it
without importing the invoker.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.ontology.model import ToolDef


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """One invocation, as a tool-aware callable or a scheme handler sees it."""

    tool: ToolDef
    args: dict[str, Any]
    timeout: float
    now: datetime | None = None
    run_id: str | None = None
