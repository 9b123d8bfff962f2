"""An MCP tool's JSON Schemas against a declared ``horis:Tool`` contract (docs/tools.md: the
declaration wins; out-of-contract calls cannot be made, out-of-contract results cannot land).

At start (:func:`contract_problems`): the MCP tool must accept every declared argument, in the
JSON shape the runtime sends it, and require nothing the contract does not supply; when it
publishes an output schema, that schema must be able to produce every declared effect key and
must not require keys the contract does not declare (every result would be refused). At each
call (:func:`narrow`): only declared arguments are sent, and an argument the graph does not hold
(``null``) is left out where the tool does not accept ``null``, or refused where it requires it.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from app.ontology.model import XSD, Ontology, ToolDef, local_name
from app.ontology.workflows import ActionStep
from app.tools.errors import ToolError

Schema = Mapping[str, Any]

_JSON_OF_XSD = {
    "string": "string",
    "date": "string",
    "dateTime": "string",
    "anyURI": "string",
    "integer": "integer",
    "decimal": "number",
    "boolean": "boolean",
}


@dataclass(frozen=True, kw_only=True)
class Shape:
    """How the runtime sends one argument (or reads one result key) as JSON."""

    json_type: str  # string | integer | number | boolean
    array: bool = False
    values: tuple[str, ...] = ()  # the individuals' local names, for an enumeration class
    label: str = ""  # the declared type, for messages

    def describe(self) -> str:
        return f"a list of {self.label}" if self.array else self.label


def _shape(ontology: Ontology, type_iri: str, *, array: bool = False) -> Shape:
    if type_iri.startswith(XSD):
        kind = type_iri[len(XSD) :]
        return Shape(json_type=_JSON_OF_XSD.get(kind, "string"), array=array, label=kind)
    cls = ontology.classes.get(type_iri)
    values = tuple(local_name(v) for v in (cls.one_of if cls is not None else ()))
    return Shape(json_type="string", array=array, values=values, label=local_name(type_iri))


def argument_shapes(ontology: Ontology, tool: ToolDef) -> dict[str, Shape]:
    """Each argument's shape: a list when some ActionStep binds it to a multi-valued property."""
    lists: set[str] = set()
    for workflow in ontology.workflows.values():
        for step in workflow.steps.values():
            if not isinstance(step, ActionStep) or step.tool != tool.iri:
                continue
            for binding in step.bindings:
                prop = ontology.properties.get(binding.property or "")
                if prop is not None and not prop.single_valued:
                    lists.add(binding.arg)
    return {a.name: _shape(ontology, a.type, array=a.name in lists) for a in tool.args}


def _resolve(schema: Any, root: Schema) -> Any:
    """Follow a local ``$ref`` (``#/$defs/X``), as pydantic writes enumerations."""
    seen = 0
    while isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str) and seen < 20:
        ref = schema["$ref"]
        if not ref.startswith("#/"):
            return {}
        node: Any = root
        for part in ref[2:].split("/"):
            node = node.get(part) if isinstance(node, Mapping) else None
        schema, seen = node if node is not None else {}, seen + 1
    return schema


def _types(schema: Schema) -> set[str] | None:
    declared = schema.get("type")
    if declared is None:
        return None
    return {declared} if isinstance(declared, str) else set(declared)


def accepts(schema: Any, shape: Shape, root: Schema) -> str | None:
    """Why ``schema`` does not accept what the runtime sends as ``shape``, or None."""
    schema = _resolve(schema, root)
    if schema is True or not isinstance(schema, Mapping) or not schema:
        return None
    if schema is False:
        return "accepts nothing"
    branches = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(branches, list):
        reasons = [
            accepts(b, shape, root) for b in branches if _types(_resolve(b, root)) != {"null"}
        ]
        if not reasons or any(r is None for r in reasons):
            return None
        return reasons[0]
    types = _types(schema)
    if shape.array:
        if types is not None and "array" not in types:
            return f"is {_said(types)}, not a list"
        return accepts(schema.get("items", {}), Shape(**{**shape.__dict__, "array": False}), root)
    if types is not None and not (
        shape.json_type in types or (shape.json_type == "integer" and "number" in types)
    ):
        return f"is {_said(types)}, not {shape.json_type}"
    enum = schema.get("enum")
    if "const" in schema:
        enum = [schema["const"]]
    if isinstance(enum, list) and shape.values:
        missing = [v for v in shape.values if v not in enum]
        if missing:
            return f"accepts only {enum}, not {missing}"
    return None


def _said(types: Iterable[str]) -> str:
    return " or ".join(sorted(types))


def contract_problems(
    ontology: Ontology,
    tool: ToolDef,
    input_schema: Schema | None,
    output_schema: Schema | None,
) -> list[str]:
    """Why the MCP tool cannot serve the declared contract (empty when it can)."""
    problems: list[str] = []
    schema = input_schema or {}
    properties = schema.get("properties") or {}
    closed = schema.get("additionalProperties") is False or bool(properties)
    shapes = argument_shapes(ontology, tool)
    for name, shape in shapes.items():
        if name not in properties:
            if closed:
                problems.append(f"it takes no argument {name!r} ({shape.describe()})")
            continue
        why = accepts(properties[name], shape, schema)
        if why is not None:
            problems.append(f"its argument {name!r} {why} (the contract sends {shape.describe()})")
    required = [r for r in schema.get("required") or [] if r not in shapes]
    if required:
        problems.append(f"it requires {sorted(required)}, which the contract does not supply")
    if output_schema:
        problems.extend(_output_problems(ontology, tool, output_schema))
    return problems


def _output_problems(ontology: Ontology, tool: ToolDef, schema: Schema) -> list[str]:
    properties = schema.get("properties") or {}
    declared = {local_name(e.property): e for e in tool.effects if not e.now}
    problems: list[str] = []
    if properties:
        for key, effect in declared.items():
            if key not in properties:
                problems.append(f"its results have no {key!r}, which the contract declares")
                continue
            if effect.type is None:
                continue
            produced = _types(_resolve(properties[key], schema))
            wanted = _shape(ontology, effect.type)
            fits = (
                produced is None
                or wanted.json_type in produced
                or (wanted.json_type == "number" and "integer" in produced)
            )
            if not fits:
                problems.append(
                    f"its result {key!r} is {_said(produced or [])}, the contract declares "
                    f"{wanted.label}"
                )
    extra = [r for r in schema.get("required") or [] if r not in declared]
    if extra:
        problems.append(
            f"its results always carry {sorted(extra)}, which the contract does not declare "
            "(every result would be refused)"
        )
    return problems


def _nullable(schema: Any, root: Schema) -> bool:
    schema = _resolve(schema, root)
    if not isinstance(schema, Mapping) or not schema:
        return True
    types = _types(schema)
    if types is not None and "null" in types:
        return True
    branches = schema.get("anyOf") or schema.get("oneOf")
    return isinstance(branches, list) and any(_nullable(b, root) for b in branches)


def narrow(tool: ToolDef, args: Mapping[str, Any], schema: Schema | None) -> dict[str, Any]:
    """The arguments to send: the declared ones only; a ``null`` the tool does not accept is
    left out where optional and refused where required."""
    schema = schema or {}
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    declared = {a.name for a in tool.args}
    missing_here = sorted(required - declared)
    if missing_here:
        raise ToolError(
            f"the MCP tool requires {missing_here}, which the declared contract does not supply",
            kind="contract",
        )
    out: dict[str, Any] = {}
    for name in declared:
        value = args.get(name)
        if properties and name not in properties:
            raise ToolError(
                f"the MCP tool does not accept the declared argument {name!r}", kind="contract"
            )
        if value is None and not _nullable(properties.get(name, {}), schema):
            if name in required:
                raise ToolError(
                    f"the graph holds no value for {name!r}, which the MCP tool requires",
                    kind="contract",
                )
            continue
        out[name] = value
    return out
