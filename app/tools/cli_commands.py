"""``horismos tools``: what this installation offers to ``horis:binding``, as the server sees it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

Echo = Callable[[str], None]


def list_tools(*, as_json: bool, out: Echo, err: Echo) -> int:
    """Print the packaged tools and the MCP servers (connected, with their tools), and check
    the configured ontology's bindings against them; 1 when an entry point does not load, a
    server cannot be reached or a binding cannot be served."""
    from app.ontology import OntologyError, default_ontology_paths, load_ontology
    from app.settings import get_settings
    from app.tools.host import ToolHost

    settings = get_settings()
    host = ToolHost.from_servers(settings.mcp_servers)
    try:
        host.connect()
        status = host.status()
        problems: list[str] = []
        paths = [Path(p) for p in settings.ontology_paths] or default_ontology_paths()
        try:
            ontology = load_ontology(paths, registry=host.registry)
        except OntologyError as exc:
            problems += [f"{p.node}: {p.message}" for p in exc.problems]
        else:
            problems += [f"{iri}: {msg}" for iri, msg in host.binding_problems(ontology)]
    finally:
        host.close()
    if as_json:
        out(json.dumps({**status, "problems": problems}, indent=2, sort_keys=True))
    else:
        _print(status, out)
    broken = [t for t in status["registered"] if t.get("error")]
    for tool in broken:
        err(f"{tool['name']}: {tool['target']} {tool['error']}")
    down = {n: s for n, s in status.get("mcp", {}).items() if s["state"] != "ready"}
    for name, server in down.items():
        err(f"MCP server {name} is {server['state']}: {server['error']}")
    for problem in problems:
        err(problem)
    return 1 if broken or down or problems else 0


def _print(status: dict[str, Any], out: Echo) -> None:
    registered = status["registered"]
    if not registered:
        out("no packaged tools (no installed package offers the horismos.tools group)")
    for tool in registered:
        origin = f" ({tool['package']})" if tool.get("package") else ""
        state = f"  UNUSABLE: {tool['error']}" if tool.get("error") else ""
        out(f"{tool['name']:<28} {tool['target']}{origin}{state}")
    for name, server in status.get("mcp", {}).items():
        tools = ", ".join(server["tools"]) or "none listed"
        out(f"mcp://{name:<22} {server['state']}: {tools}")
