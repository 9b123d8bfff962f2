"""Tool contracts on the interpreter's side: arguments from the graph, results against
``horis:effect``. Pure: the call itself happens behind ``RunContext.tools``.

Arguments (docs/tools.md): ``horis:bind [ horis:arg "queue" ; horis:property :acuity ]`` reads the
focus's property (one value for a single-valued property, else a list), ``horis:focus true``
passes the focus instance id. Individuals and classes travel by local name, decimals as JSON
numbers. A value the graph does not hold is passed as ``null`` (an escalation must still be able
to page when data are missing); a value it does hold must have the declared ``horis:type``.

Results: a JSON object with exactly the keys of the ``horis:type`` effects (local names), each
of its declared type or ``null`` (the tool has no value for it: nothing is asserted);
``horis:value horis:now`` effects are filled from the run's clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from app.ontology.model import XSD, Ontology, ToolDef, local_name
from app.ontology.workflows import ActionStep
from app.runtime.names import iri_for, is_subclass, namespace_of, show
from app.world import World
from app.world.facts import Assert, Change


class ContractError(Exception):
    """A call or result outside the tool's declared contract."""


def resolve_args(
    ontology: Ontology, world: World, focus: str | None, step: ActionStep, tool: ToolDef
) -> dict[str, Any]:
    """The tool's arguments, read from the graph through the step's bindings."""
    bound = {b.arg: b for b in step.bindings}
    args: dict[str, Any] = {}
    for arg in tool.args:
        binding = bound.get(arg.name)
        if binding is None:
            raise ContractError(f"argument {arg.name!r} of {tool.name} has no horis:bind")
        if binding.focus:
            value: Any = focus
            if focus is not None:
                _check_type(ontology, world, arg.name, arg.type, focus)
        elif binding.property is not None:
            values = world.values(focus, binding.property) if focus is not None else ()
            for v in values:
                _check_type(ontology, world, arg.name, arg.type, v)
            prop = ontology.properties.get(binding.property)
            shown = [show(ontology, v) for v in values]
            value = (
                shown if prop is not None and not prop.single_valued else next(iter(shown), None)
            )
        else:
            raise ContractError(f"argument {arg.name!r} binds neither a property nor the focus")
        args[arg.name] = value
    extra = sorted(set(bound) - {a.name for a in tool.args})
    if extra:
        raise ContractError(f"{tool.name} takes no argument(s) {extra}")
    return args


def _check_type(ontology: Ontology, world: World, name: str, type_iri: str, value: Any) -> None:
    if type_iri.startswith(XSD):
        if not _datatype_ok(type_iri, value):
            raise ContractError(f"argument {name!r} = {value!r} is not {local_name(type_iri)}")
        return
    if isinstance(value, str):
        individual = ontology.individuals.get(value)
        if individual is not None and is_subclass(ontology, individual.class_iri, type_iri):
            return
        if value in ontology.classes and is_subclass(ontology, value, type_iri):
            return
        if world.instance(value) is not None and world.is_a(value, type_iri):
            return
    raise ContractError(f"argument {name!r} = {value!r} is not a {local_name(type_iri)}")


def _datatype_ok(type_iri: str, value: Any) -> bool:
    from decimal import Decimal

    kind = type_iri[len(XSD) :]
    if kind == "string" or kind in ("dateTime", "date"):
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "decimal":
        return isinstance(value, int | float | Decimal) and not isinstance(value, bool)
    return False


def effect_changes(
    ontology: Ontology,
    world: World,
    tool: ToolDef,
    result: Mapping[str, Any],
    *,
    focus: str | None,
    now: datetime,
) -> list[Change]:
    """The changes a tool result asserts on the focus, or ``ContractError``."""
    declared = {local_name(e.property): e for e in tool.effects if not e.now}
    extra = sorted(set(result) - set(declared))
    missing = sorted(set(declared) - set(result))
    if extra or missing:
        parts = [
            f"undeclared key(s) {extra}" if extra else "",
            f"missing {missing}" if missing else "",
        ]
        raise ContractError(f"{tool.name} result: " + "; ".join(p for p in parts if p))
    if focus is None:
        if tool.effects:
            raise ContractError(f"{tool.name} has effects but the run has no focus instance")
        return []
    changes: list[Change] = []
    for key, effect in declared.items():
        value = result[key]
        if value is None:  # the tool has no value for it (an MME it cannot compute): no fact
            continue
        type_iri = effect.type or ""
        if type_iri.startswith(XSD):
            if not _datatype_ok(type_iri, value):
                raise ContractError(f"{tool.name} result {key!r} = {value!r} is not {type_iri}")
            changes.append(Assert(focus, effect.property, value))
        else:
            if not isinstance(value, str):
                raise ContractError(f"{tool.name} result {key!r} = {value!r} names nothing")
            target = iri_for(ontology, value, namespace_of(tool.iri))
            resolved = target if target in ontology.individuals else value
            _check_type(ontology, world, key, type_iri, resolved)
            changes.append(Assert(focus, effect.property, resolved))
    for effect in tool.effects:
        if effect.now:
            changes.append(Assert(focus, effect.property, now.isoformat()))
    return changes
