"""``ToolHost``: the tools one process offers, built once and shared by every run.

The service's lifespan, ``horismos run``, ``horismos replay`` and ``horismos tools`` build one
from the settings: the callables installed packages register (:mod:`app.tools.packaged`) and a
session to every MCP server of ``HORISMOS_MCP_SERVERS`` (:mod:`app.tools.mcp`). Each run gets
its own :class:`~app.tools.invoker.ToolInvoker` from :meth:`ToolHost.invoker`, so a hook call can
register its own adapter handlers (``fhir``) without touching the others.

:meth:`ToolHost.check` holds every binding of an ontology against what the host can serve:
a broken packaged tool, an ``mcp://NAME/tool`` whose server is not configured, whose server does
not offer the tool, or whose schemas do not fit the declared contract is a problem (the service
refuses to start); a configured server that cannot be reached is not: it makes the deployments
that bind it unready (:meth:`ToolHost.readiness`) and is checked when it comes back.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from app.ontology.loader import Registry
from app.ontology.model import Ontology, ToolDef
from app.ontology.workflows import ActionStep, SubflowStep
from app.tools.invoker import ToolInvoker
from app.tools.mcp_contract import contract_problems
from app.tools.packaged import PackagedTools, discover

if TYPE_CHECKING:
    from app.settings import McpServer
    from app.tools.mcp import McpPool

log = logging.getLogger("horismos.tools")


def _mcp_target(tool: ToolDef) -> tuple[str, str] | None:
    if tool.commits is not None or not tool.binding.startswith("mcp://"):
        return None
    server, _, name = tool.binding[len("mcp://") :].partition("/")
    return (server, name.strip("/")) if server and name else None


@dataclass
class ToolHost:
    """Packaged tools by name and MCP sessions; shared by every run of the process."""

    packaged: PackagedTools = field(default_factory=PackagedTools)
    mcp: McpPool | None = None
    #: the ontologies (deployments) whose MCP bindings were checked, by digest: a server that
    #: comes back is checked against them
    _checked: dict[str, Ontology] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def discover(cls) -> ToolHost:
        """Register every tool the installed packages offer (``horismos.tools``); no MCP."""
        return cls(packaged=discover())

    @classmethod
    def from_servers(
        cls, servers: Mapping[str, McpServer], packaged: PackagedTools | None = None
    ) -> ToolHost:
        """The packaged tools and a (not yet connected) pool for ``servers``."""
        pool = None
        if servers:
            from app.tools.mcp import McpPool

            pool = McpPool(servers)
        host = cls(packaged=packaged if packaged is not None else discover(), mcp=pool)
        if pool is not None:
            pool.on_connect = host._recheck
        return host

    @property
    def registry(self) -> Registry:
        """What ``python:NAME`` and ``rust:NAME`` bindings resolve to (the loader checks it)."""
        return self.packaged.registry

    def invoker(self) -> ToolInvoker:
        """A fresh invoker for one run, sharing the registry and the MCP sessions."""
        return ToolInvoker(tools=dict(self.registry), mcp=self.mcp)

    def connect(self) -> None:
        """Open every MCP session (bounded; an unreachable server is recorded, not raised)."""
        if self.mcp is not None:
            self.mcp.connect_all()

    def close(self) -> None:
        if self.mcp is not None:
            self.mcp.close()

    # --- checks ------------------------------------------------------------------------------

    def binding_problems(self, ontology: Ontology) -> list[tuple[str, str]]:
        """``(tool IRI, message)`` for every binding the host cannot serve: packaged tools that
        did not load (:meth:`packaged_problems`), and MCP bindings (:meth:`mcp_problems`)."""
        return self.packaged_problems(ontology) + self.mcp_problems(ontology)

    def packaged_problems(self, ontology: Ontology) -> list[tuple[str, str]]:
        """``(tool IRI, message)`` for every binding to an entry point that did not load: an
        offline check (``horismos verify``), unlike the MCP one, which needs the servers."""
        bindings = {iri: tool.binding for iri, tool in ontology.tools.items()}
        return self.packaged.problems_for(bindings)

    def mcp_problems(self, ontology: Ontology) -> list[tuple[str, str]]:
        """``(tool IRI, message)`` for every ``mcp://`` binding the host cannot serve (see the
        module); remembers ``ontology`` so a server that comes back later is checked against
        it."""
        problems: list[tuple[str, str]] = []
        with self._lock:
            self._checked[ontology.digest] = ontology
        for tool in ontology.tools.values():
            target = _mcp_target(tool)
            if target is None:
                continue
            message = self._mcp_problem(ontology, tool, *target)
            if message is not None:
                problems.append((tool.iri, message))
        return problems

    def _mcp_problem(self, ontology: Ontology, tool: ToolDef, server: str, name: str) -> str | None:
        binding = tool.binding
        pool = self.mcp
        if pool is None or server not in pool.names:
            configured = ", ".join(pool.names) if pool is not None else "none"
            return (
                f"{binding}: no MCP server {server!r} is configured in HORISMOS_MCP_SERVERS "
                f"(configured: {configured})"
            )
        listed = pool.listed(server)
        if listed is None:
            return None  # not reached yet: readiness says so; checked when it connects
        found = listed.get(name)
        message: str | None = None
        if found is None:
            offers = ", ".join(sorted(listed)) or "no tools"
            message = f"{binding}: MCP server {server!r} has no tool {name!r} (it offers {offers})"
        else:
            reasons = contract_problems(ontology, tool, found.input_schema, found.output_schema)
            if reasons:
                message = (
                    f"{tool.name} (horis:takes {_takes(tool)}) does not fit MCP tool "
                    f"{server}/{name}: " + "; ".join(reasons)
                )
        if message is None:
            pool.refused.pop(binding, None)
        else:
            pool.refused[binding] = message
        return message

    def _recheck(self, server: str) -> None:
        """A server (re)connected: check the bindings to it again; a mismatch refuses calls."""
        with self._lock:
            ontologies = list(self._checked.values())
        for ontology in ontologies:
            for tool in ontology.tools.values():
                target = _mcp_target(tool)
                if target is not None and target[0] == server:
                    message = self._mcp_problem(ontology, tool, *target)
                    if message is not None:
                        log.error("MCP binding refused: %s", message)

    # --- what the host reports ------------------------------------------------------------------

    def unready(self, ontology: Ontology | None) -> str | None:
        """Why a deployment cannot answer now: an MCP server its workflows (or the subflows
        they reach) bind is unreachable, or a binding to it was refused when it connected;
        None when it is ready."""
        if ontology is None or self.mcp is None:
            return None
        servers: set[str] = set()
        for workflow in ontology.workflows:
            servers |= _servers_of(ontology, workflow)
        problems = [p for p in (self._server_problem(s) for s in sorted(servers)) if p]
        return "; ".join(problems) or None

    def _server_problem(self, server: str) -> str | None:
        pool = self.mcp
        if pool is None or server not in pool.names:
            return f"MCP server {server!r} is not configured"
        state, error = pool.state(server)
        if state != "ready":
            return f"MCP server {server!r} is {state}" + (f": {error}" if error else "")
        refused = [m for b, m in pool.refused.items() if b.startswith(f"mcp://{server}/")]
        return refused[0] if refused else None

    def wake(self) -> None:
        """Start reconnecting unreachable MCP servers (for the next readiness probe)."""
        if self.mcp is not None:
            self.mcp.wake()

    def status(self) -> dict[str, Any]:
        """What the host registered, for ``/readyz`` and ``horismos tools``."""
        body: dict[str, Any] = {"registered": [t.to_json() for t in self.packaged.listing]}
        if self.mcp is not None:
            servers: dict[str, Any] = {}
            for name in self.mcp.names:
                state, error = self.mcp.state(name)
                listed = self.mcp.listed(name)
                servers[name] = {
                    "state": state,
                    "error": error,
                    "tools": sorted(listed) if listed is not None else [],
                }
            body["mcp"] = servers
        return body


def _takes(tool: ToolDef) -> str:
    from app.ontology.model import local_name

    return ", ".join(f"{a.name}: {local_name(a.type)}" for a in tool.args) or "nothing"


def _servers_of(ontology: Ontology, workflow_iri: str, seen: set[str] | None = None) -> set[str]:
    """The MCP servers a workflow's ActionSteps (and its subflows') bind."""
    seen = seen if seen is not None else set()
    if workflow_iri in seen or workflow_iri not in ontology.workflows:
        return set()
    seen.add(workflow_iri)
    out: set[str] = set()
    for step in ontology.workflows[workflow_iri].steps.values():
        tool = ontology.tools.get(step.tool or "") if isinstance(step, ActionStep) else None
        target = _mcp_target(tool) if tool is not None else None
        if target is not None:
            out.add(target[0])
        if isinstance(step, SubflowStep) and step.workflow is not None:
            out |= _servers_of(ontology, step.workflow, seen)
    return out
