"""``horismos tools``: what this installation offers to ``horis:binding``, as the server sees it."""

from __future__ import annotations

import json
from collections.abc import Callable

Echo = Callable[[str], None]


def list_tools(*, as_json: bool, out: Echo, err: Echo) -> int:
    """Print the packaged tools; 1 when any entry point does not load."""
    from app.tools.host import ToolHost

    host = ToolHost.discover()
    status = host.status()
    if as_json:
        out(json.dumps(status, indent=2, sort_keys=True))
    else:
        registered = status["registered"]
        if not registered:
            out("no packaged tools (no installed package offers the horismos.tools group)")
        for tool in registered:
            origin = f" ({tool['package']})" if tool.get("package") else ""
            state = f"  UNUSABLE: {tool['error']}" if tool.get("error") else ""
            out(f"{tool['name']:<28} {tool['target']}{origin}{state}")
    broken = [t for t in status["registered"] if t.get("error")]
    for tool in broken:
        err(f"{tool['name']}: {tool['target']} {tool['error']}")
    return 1 if broken else 0
