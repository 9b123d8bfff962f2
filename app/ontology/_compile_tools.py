"""Compiling ``horis:Tool`` nodes: arguments, effects, the binding, and what the tool may do.

A tool declared ``horis:pure true`` only computes from its arguments (and the data it ships): it
runs in the process and acts on nothing outside, so a hook run that calls it needs no claim
before the call (docs/tools.md, "Pure tools").
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from rdflib.term import Node

from app.ontology._compile_base import BINDING_SCHEMES, CompilerBase, H
from app.ontology.activity import activity_problems, parse_activity
from app.ontology.names import local_name
from app.ontology.templates import template_problem
from app.ontology.tools import AdapterCommit, CommitOperation, EffectDecl, ToolArg, ToolDef

#: the bindings that run in the process: the only ones a pure tool may have
IN_PROCESS = ("python:", "rust:")


class ToolCompiler(CompilerBase):
    """Reads ``horis:Tool`` nodes; problems go to ``reader.problems``."""

    def _tool(self, node: Node) -> ToolDef:
        r = self.r
        arg_nodes = [a for t in r.objects(node, H("takes")) for a in r.members(t, H("arg"))]
        arg_nodes += r.members(node, H("arg"))
        args: list[ToolArg] = []
        for a in arg_nodes:
            name = self.string(a, H("name"), required=True)
            typ = self.type_ref(a, H("type"), r.one(a, H("type")))
            if not r.peek(a, H("type")):
                r.problem("missing", a, "an argument needs horis:type")
            if name and typ:
                args.append(ToolArg(name=name, type=typ))
        effect_nodes = [e for t in r.objects(node, H("effect")) for e in r.members(t, H("asserts"))]
        effect_nodes += r.members(node, H("asserts"))
        effects: list[EffectDecl] = []
        for e in effect_nodes:
            prop = self.ref(e, H("property"), r.one(e, H("property")), ("property",))
            now = self.constant(e, H("value"), ("now",)) == "now"
            typ = self.type_ref(e, H("type"), r.one(e, H("type")))
            if not now and typ is None and not r.peek(e, H("type")):
                r.problem("missing", e, "an effect needs horis:value horis:now or horis:type T")
            if prop:
                effects.append(EffectDecl(property=prop, type=typ, now=now))
        binding = self.string(node, H("binding"), required=True) or ""
        commits = self._commits(node)
        if binding:
            self._check_binding(node, binding, commits is not None)
        pure = bool(self.boolean(node, H("pure")))
        if pure and (commits is not None or not binding.startswith(IN_PROCESS)):
            self.r.problem(
                "binding",
                node,
                "a horis:pure tool runs in the process (python: or rust:) and writes nothing "
                "(no horis:commits): it cannot act outside",
                via=H("pure"),
            )
        return ToolDef(
            iri=str(node),
            name=local_name(str(node)),
            args=tuple(args),
            effects=tuple(effects),
            binding=binding,
            timeout=self.duration(node, H("timeout")) or 5.0,
            idempotent=bool(self.boolean(node, H("idempotent"))),
            retries=self.count(node, H("retries")),
            commits=commits,
            pure=pure,
            label=self.label(node),
        )

    def _commits(self, node: Node) -> AdapterCommit | None:
        c = self.r.one(node, H("commits"))
        if c is None:
            return None
        named = self.constant(c, H("operation"), ("Update", "Patch", "Create")) or "Update"
        operation: CommitOperation = "create" if named == "Create" else "update"
        if named == "Patch":
            operation = "patch"
        creates = operation == "create"
        activity = self.string(c, H("activity"))
        if activity is not None:
            self._commit_activity(c, activity, creates)
        template = self.string(c, H("template"), required=creates and activity is None)
        if template is not None and activity is not None:
            self.r.problem(
                "not-understood",
                c,
                "a create writes either its horis:template or its horis:activity, not both",
                via=H("activity"),
            )
        if template is not None:
            problem = template_problem(template, str(self.string(c, H("resourceType")) or ""))
            if problem:
                self.r.problem("literal-type", c, problem, via=H("template"))
            if not creates:
                self.r.problem(
                    "not-understood",
                    c,
                    "horis:template applies to horis:Create only",
                    via=H("template"),
                )
        return AdapterCommit(
            resource_type=self.string(c, H("resourceType"), required=True) or "",
            element=self.string(c, H("element"), required=not creates) or "",
            value_arg=self.string(c, H("valueArg"), required=not creates) or "",
            code_system=self.string(c, H("codeSystem")),
            operation=operation,
            scope=self.string(c, H("scope"), required=True) or "",
            template=template,
            activity=activity,
        )

    def _commit_activity(self, c: Node, activity: str, creates: bool) -> None:
        """A create's ``horis:activity``: an ActivityDefinition (``app.ontology.activity``)
        with a url, so that the request written says what it instantiates, of the kind the
        commit's resource type names."""
        problems = activity_problems(activity)
        if not problems:
            definition = parse_activity(activity).definition
            kind = self.string(c, H("resourceType"))
            if definition.get("kind") != kind:
                problems.append(
                    f"its ActivityDefinition's kind {definition.get('kind')!r} is not the "
                    f"commit's horis:resourceType {kind!r}"
                )
            if not isinstance(definition.get("url"), str):
                problems.append(
                    "its ActivityDefinition needs a url: the request written names the "
                    "definition it instantiates"
                )
        if not creates:
            problems.append("horis:activity applies to horis:Create only")
        for problem in problems:
            self.r.problem("literal-type", c, f"horis:activity: {problem}", via=H("activity"))

    def _check_binding(self, node: Node, binding: str, commits: bool) -> None:
        problem = _binding_problem(binding, self.registry, commits)
        if problem:
            self.r.problem("binding", node, problem, via=H("binding"))


def _binding_problem(
    binding: str, registry: Mapping[str, Callable[..., Any]], commits: bool
) -> str | None:
    """Why a tool binding cannot be used, or None."""
    if not binding.startswith(BINDING_SCHEMES):
        return (
            f'binding "{binding}" must start with python:, rust:, http(s)://, mcp:// '
            "or be fhir:commit"
        )
    if binding.startswith("fhir:"):
        if binding != "fhir:commit":
            return f'unknown FHIR binding "{binding}" (only "fhir:commit")'
        if not commits:
            return 'binding "fhir:commit" needs horis:commits [ … ] saying what is written'
        return None
    scheme, _, name = binding.partition(":")
    if scheme == "rust":
        if name not in registry and binding not in registry:
            return (
                f'rust:{name} is not registered (no installed package offers "{name}" in the '
                "horismos.tools entry-point group)"
            )
        return None
    if scheme == "python":
        if name in registry or binding in registry:
            return None
        module, _, attr = name.rpartition(".")
        if not module:
            return (
                f'python:{name} is not registered (no installed package offers "{name}" in the '
                "horismos.tools entry-point group) and is no dotted path module.function"
            )
        try:
            target = getattr(importlib.import_module(module), attr)
        except ImportError as exc:
            return f"python:{name} cannot be imported ({exc})"
        except AttributeError:
            return f"module {module} has no attribute {attr!r}"
        if not callable(target):
            return f"python:{name} is not callable"
        return None
    if scheme == "mcp":
        server, _, tool = binding[len("mcp://") :].partition("/")
        if not server or not tool:
            return f'MCP binding "{binding}" must be mcp://server/tool'
        return None
    rest = binding.split("://", 1)[1]
    if not rest:
        return f'HTTP binding "{binding}" has no host'
    return None
