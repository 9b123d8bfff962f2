"""The base of every verification checker (the ontology, the problems found) and the type
checks of a condition against the properties its path reads, which rules, aggregates, steps
and cards share.
"""

from __future__ import annotations

from app.ontology.classes import PropertyDef
from app.ontology.errors import Problem, ProblemCode
from app.ontology.model import Ontology
from app.ontology.names import XSD, local_name
from app.ontology.rules import Condition, Value
from app.ontology.workflows import StepDef

#: the ranges whose values are numbers, and those whose values are dates
NUMBERS = (XSD + "decimal", XSD + "integer")
DATES = (XSD + "dateTime", XSD + "date")
_ORDERED = ("greaterThan", "atLeast", "lessThan", "atMost")


class ConditionChecker:
    """What every checker holds, and the checks of a condition or a value against a property."""

    def __init__(self, o: Ontology) -> None:
        self.o = o
        self.problems: list[Problem] = []
        self.steps: dict[str, StepDef] = {
            iri: s for w in o.workflows.values() for iri, s in w.steps.items()
        }

    def add(
        self,
        code: ProblemCode,
        node: str,
        message: str,
        path: str | None = None,
        *,
        suggestion: str | None = None,
    ) -> None:
        self.problems.append(
            Problem(code=code, node=node, message=message, path=path, suggestion=suggestion)
        )

    def check_domain(
        self, p: PropertyDef, subject: str | None, node: str, path: str | None
    ) -> None:
        if subject is None or not p.domain:
            return
        if not (self.o.is_subclass(subject, p.domain) or self.o.is_subclass(p.domain, subject)):
            self.add(
                "type-check",
                node,
                f"{p.name} belongs to {local_name(p.domain)}, not to {local_name(subject)}",
                path,
            )

    def condition_on(self, c: Condition, subject: str | None, node: str, fallback: str) -> None:
        """Type-check a condition read on ``subject``; ``fallback`` is its path if unknown."""
        self._condition(c, subject, node, where_of(c, node) or fallback)

    def _condition(
        self, c: Condition, subject: str | None, node: str, where: str | None = None
    ) -> None:
        where = where or where_of(c, node)
        current = subject
        last: PropertyDef | None = None
        for i, iri in enumerate(c.path):
            prop = self.o.properties.get(iri)
            if prop is None:
                self.add("type-check", node, f"{iri} is not a declared property", where)
                return
            self.check_domain(prop, current, node, where)
            if i < len(c.path) - 1 and not prop.is_object:
                self.add(
                    "type-check",
                    node,
                    f"the path continues after {prop.name}, whose values are literals",
                    where,
                )
                return
            current, last = prop.range, prop
        if last is None:
            return
        self._operator(c, last, node, where)

    def _operator(self, c: Condition, p: PropertyDef, node: str, where: str | None) -> None:
        op = f"horis:{c.op}"
        if c.op in _ORDERED:
            if p.range in NUMBERS and isinstance(c.value, str):
                self.add(
                    "type-check", node, f"{op} compares {p.name} (a number) with a date", where
                )
            elif p.range in DATES and not isinstance(c.value, str):
                self.add(
                    "type-check", node, f"{op} compares {p.name} (a date) with a number", where
                )
            elif p.range not in NUMBERS + DATES:
                self.add(
                    "type-check",
                    node,
                    f"{op} needs a numeric or date property; {p.name} ranges over "
                    f"{local_name(p.range)}",
                    where,
                )
        elif c.op in ("withinPast", "atMostAgo", "atLeastAgo"):
            if p.range not in DATES:
                self.add(
                    "type-check",
                    node,
                    f"{op} is a time window: it needs an xsd:date or xsd:dateTime property, not "
                    f"{p.name} ({local_name(p.range)})",
                    where,
                )
        elif c.op == "inValueSet":
            if p.range != XSD + "string":
                self.add(
                    "type-check",
                    node,
                    f'{op} needs an xsd:string property holding "system|code" codings, not '
                    f"{p.name} ({local_name(p.range)})",
                    where,
                )
        elif c.op == "matches":
            if p.range != XSD + "string":
                self.add(
                    "type-check", node, f"{op} needs an xsd:string property, not {p.name}", where
                )
        elif c.op == "isA":
            target = str(c.value)
            if target not in self.o.classes:
                self.add(
                    "type-check",
                    node,
                    f"{op} names {local_name(target)}, which is not a class",
                    where,
                )
            elif not p.is_object:
                self.add(
                    "type-check", node, f"{op} needs an object property; {p.name} is literal", where
                )
            elif not (self.o.is_subclass(target, p.range) or self.o.is_subclass(p.range, target)):
                self.add(
                    "type-check",
                    node,
                    f"{op} {local_name(target)} can never hold: {p.name} ranges over "
                    f"{local_name(p.range)}",
                    where,
                )
        elif c.op in ("is", "isNot"):
            self._value_fits(p, _scalar(c.value), node, where, op)
        elif c.op in ("in", "notIn"):
            values = c.value if isinstance(c.value, tuple) else (c.value,)
            for v in values:
                self._value_fits(p, v, node, where, op)

    def _value_fits(
        self, p: PropertyDef, value: Value, node: str, where: str | None, what: str
    ) -> None:
        if p.one_of and value not in p.one_of:
            allowed = ", ".join(local_name(str(v)) for v in p.one_of)
            self.add(
                "type-check",
                node,
                f"{what} {local_name(str(value))} is not in the horis:oneOf of {p.name} "
                f"({allowed})",
                where,
            )
            return
        if p.is_object:
            cls = self.o.class_of(str(value)) if isinstance(value, str) else None
            if cls is None or not self.o.is_subclass(cls, p.range):
                self.add(
                    "type-check",
                    node,
                    f"{what} {value!r} is not an individual of {local_name(p.range)}",
                    where,
                )
            return
        ok = {
            XSD + "boolean": isinstance(value, bool),
            XSD + "string": isinstance(value, str),
            XSD + "dateTime": isinstance(value, str),
            XSD + "date": isinstance(value, str),
            XSD + "integer": isinstance(value, int) and not isinstance(value, bool),
        }.get(p.range, not isinstance(value, (bool, str)))
        if not ok:
            self.add(
                "type-check",
                node,
                f"{what} {value!r} does not fit {p.name} ({local_name(p.range)})",
                where,
            )


def _scalar(value: Value | tuple[Value, ...]) -> Value:
    return value[0] if isinstance(value, tuple) and value else value  # type: ignore[return-value]


def where_of(c: Condition, node: str) -> str | None:
    if c.node and c.node.startswith(node + " "):
        return c.node[len(node) + 1 :]
    return None
