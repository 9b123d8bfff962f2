"""Reading FHIR JSON: FHIRPath evaluation, resources in prefetch values, codings, sources.

Pure functions shared by hydration (``app.fhir.hydrate``) and the instances it builds
(``app.fhir.instances``).
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from decimal import Decimal
from functools import lru_cache
from typing import Any

from fhirpathpy import compile as fhirpath_compile
from fhirpathpy.parser import parse as fhirpath_parse

from app.world.facts import Source

_MEMBER_PATH = re.compile(r"^[A-Za-z][A-Za-z0-9]*(\.[A-Za-z][A-Za-z0-9]*)*$")


@lru_cache(maxsize=256)
def _path(expression: str) -> Any:
    if _MEMBER_PATH.match(expression):
        return tuple(expression.split("."))
    general = fhirpath_compile(expression, None)
    return _subset(expression, general) or general


# --- a direct evaluator for the FHIRPath the deployments' filters use -------------------------
#
# A ``horis:where`` filter such as ``clinicalStatus.coding.where(code = 'active').exists() and
# verificationStatus.coding.where(code = 'refuted').empty()`` took fhirpathpy ~0.25 ms per
# resource (half of a triage hook's hydration). Boolean expressions made only of member paths,
# ``where(…)``, ``exists()``, ``empty()``, ``= 'string'``, a path compared with a number
# (``>``, ``<``, ``>=``, ``<=``), ``and``, ``or`` and parentheses are
# compiled (once per expression, from fhirpathpy's own parse tree) into plain functions that
# give fhirpathpy's results, empty included (~0.01 ms). Any other expression, and any resource
# the direct walk is not sure to read alike (a ``_element`` extension sibling, a null in an
# array), is evaluated by fhirpathpy as before. ``tests/cds/test_fhirpath_subset.py`` compares
# the two on generated resources.
#
# Expressions that give a collection (the opioid services' dose and drug-name readings, ~0.3 ms
# each through fhirpathpy) are compiled the same way when made of member paths, ``where(…)``,
# ``select(…)``, ``|`` (union: distinct, as fhirpathpy compares), ``first()``, ``count()`` and
# ``iif(criterion, a[, b])``; their values come back as fhirpathpy gives them (a decimal as a
# ``Decimal``). A value that is not a primitive goes to fhirpathpy.


class _Unsupported(Exception):
    """Outside the subset: the expression (at compile time) or the data (at run time)."""


_Collection = Callable[[Any], list[Any]]
#: True, False, or None for FHIRPath's empty result (three-valued logic)
_Predicate = Callable[[Any], bool | None]
_IDENTIFIER = re.compile(r"^[a-z][A-Za-z0-9]*$")
#: Identifiers fhirpathpy reads specially (``length`` of a string).
_SPECIAL = frozenset({"length"})


def _subset(expression: str, general: Any) -> Callable[[Mapping[str, Any]], Any] | None:
    """A direct evaluator of ``expression`` that falls back to ``general`` (fhirpathpy) for data
    it does not read alike; None when the expression is outside the subset."""
    try:
        tree: Mapping[str, Any] = fhirpath_parse(expression)  # type: ignore[no-untyped-call]
        node = tree if "type" in tree else _only(tree)
        if not _is_boolean(node):
            return _values(_collection(node), general)
        predicate = _predicate(node)
    except _Unsupported:
        return None
    except Exception:  # fhirpathpy's own compile reports a bad expression
        return None

    def evaluate_direct(resource: Any) -> Any:
        try:
            answer = predicate(resource)
        except _Unsupported:
            return general(resource)
        return [] if answer is None else [answer]

    return evaluate_direct


def _values(values: _Collection, general: Any) -> Callable[[Mapping[str, Any]], Any]:
    """A collection expression's direct evaluator: its values as fhirpathpy returns them."""

    def evaluate_values(resource: Any) -> Any:
        try:
            return [_as_fhirpathpy(v) for v in values(resource)]
        except _Unsupported:
            return general(resource)

    return evaluate_values


def _as_fhirpathpy(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(str(value))  # fhirpathpy's decimal
    if isinstance(value, dict | list):
        raise _Unsupported  # a complex value: fhirpathpy wraps it its own way
    return value


def _distinct(items: list[Any]) -> list[Any]:
    """FHIRPath's union of what member navigation found, deduplicated as fhirpathpy does (by
    the JSON of each value, the first place kept)."""
    seen: dict[str, Any] = {}
    for item in items:
        seen[json.dumps(item, sort_keys=True)] = item
    return list(seen.values())


def _only(node: Mapping[str, Any]) -> Mapping[str, Any]:
    children = node.get("children") or []
    if len(children) != 1:
        raise _Unsupported
    only: Mapping[str, Any] = children[0]
    return only


def _ops(node: Mapping[str, Any]) -> list[str]:
    return [str(t).strip() for t in node.get("terminalNodeText") or []]


def _function(node: Mapping[str, Any]) -> tuple[str, list[Mapping[str, Any]]] | None:
    """(name, parameters) of an invocation expression's trailing function call."""
    if node.get("type") != "InvocationExpression":
        return None
    call = node["children"][1]
    if call.get("type") != "FunctionInvocation":
        return None
    functn = _only(call)
    name_node, *rest = functn["children"]
    params = rest[0]["children"] if rest else []
    return str(name_node.get("text")), params


def _is_boolean(node: Mapping[str, Any]) -> bool:
    kind = node.get("type")
    if kind in ("AndExpression", "OrExpression", "EqualityExpression", "InequalityExpression"):
        return True
    if kind == "TermExpression" and _only(node).get("type") == "ParenthesizedTerm":
        return _is_boolean(_only(_only(node)))
    called = _function(node)
    return called is not None and called[0] in ("exists", "empty")


def _predicate(node: Mapping[str, Any]) -> _Predicate:
    kind = node.get("type")
    if kind in ("AndExpression", "OrExpression"):
        left, right = (_predicate(c) for c in node["children"])
        if kind == "AndExpression" and _ops(node) == ["and"]:
            return lambda item: _junction(False, left, right, item)
        if kind == "OrExpression" and _ops(node) == ["or"]:
            return lambda item: _junction(True, left, right, item)
        raise _Unsupported
    if kind == "EqualityExpression" and _ops(node) == ["="]:
        a, b = node["children"]
        literal, path = (_string(a), b) if _string(a) is not None else (_string(b), a)
        if literal is None:
            raise _Unsupported
        values = _collection(path)

        def equal(item: Any) -> bool | None:
            found = values(item)
            if not found:
                return None  # an empty operand: the comparison is empty
            return len(found) == 1 and found[0] == literal

        return equal
    if kind == "InequalityExpression" and _ops(node) in ([">"], ["<"], [">="], ["<="]):
        return _inequality(node)
    if kind == "TermExpression" and _only(node).get("type") == "ParenthesizedTerm":
        return _predicate(_only(_only(node)))
    called = _function(node)
    if called is not None and not called[1] and called[0] in ("exists", "empty"):
        base = _collection(node["children"][0])
        if called[0] == "exists":
            return lambda item: len(base(item)) > 0
        return lambda item: len(base(item)) == 0
    raise _Unsupported


_ORDER: dict[str, Callable[[Decimal, Decimal], bool]] = {
    ">": operator.gt,
    "<": operator.lt,
    ">=": operator.ge,
    "<=": operator.le,
}
#: the operator read from the other side (``0 < x`` is ``x > 0``)
_MIRROR = {">": "<", "<": ">", ">=": "<=", "<=": ">="}


def _inequality(node: Mapping[str, Any]) -> _Predicate:
    """``path > number`` (``<``, ``>=``, ``<=``, the number on either side): empty when the path
    is; one number compared as fhirpathpy compares it (a JSON number by its decimal text, so
    0.1 is not greater than 0.1); anything else (several values, a string, a boolean, where
    fhirpathpy raises) goes to fhirpathpy."""
    a, b = node["children"]
    op = _ops(node)[0]
    left, right = _number(a), _number(b)
    if right is not None and left is None:
        literal, path = right, a
    elif left is not None and right is None:
        literal, path, op = left, b, _MIRROR[op]
    else:
        raise _Unsupported
    values = _collection(path)
    compare = _ORDER[op]

    def ordered(item: Any) -> bool | None:
        found = values(item)
        if not found:
            return None
        if len(found) != 1:
            raise _Unsupported
        value = found[0]
        if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
            raise _Unsupported
        return compare(Decimal(str(value)) if isinstance(value, float) else Decimal(value), literal)

    return ordered


def _literal(node: Mapping[str, Any], kind: str) -> str | None:
    """The text of a literal term of ``kind`` (``NumberLiteral``, ``StringLiteral``), else
    None."""
    if node.get("type") != "TermExpression":
        return None
    term = _only(node)
    if term.get("type") != "LiteralTerm" or _only(term).get("type") != kind:
        return None
    return str(_only(term).get("text"))


def _number(node: Mapping[str, Any]) -> Decimal | None:
    """The value of a plain number literal term (``21``, ``0.5``), else None."""
    text = _literal(node, "NumberLiteral")
    if text is None:
        return None
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)?", text):
        raise _Unsupported
    return Decimal(text)


def _junction(decisive: bool, left: _Predicate, right: _Predicate, item: Any) -> bool | None:
    """FHIRPath's three-valued ``and`` (``decisive`` False) and ``or`` (True): either side
    equal to ``decisive`` decides; else empty (None) if either side is empty. Both sides are
    evaluated, as fhirpathpy does: a side it would fail on (a number compared with a boolean)
    fails the whole expression there, so it must here too."""
    a = left(item)
    b = right(item)
    if a is decisive or b is decisive:
        return decisive
    return None if a is None or b is None else not decisive


def _string(node: Mapping[str, Any]) -> str | None:
    """The value of a plain string literal term (no escapes), else None."""
    text = _literal(node, "StringLiteral")
    if text is None:
        return None
    if len(text) < 2 or text[0] != "'" or text[-1] != "'" or "\\" in text or "'" in text[1:-1]:
        raise _Unsupported
    return text[1:-1]


def _identifier(node: Mapping[str, Any]) -> str:
    if node.get("type") != "MemberInvocation":
        raise _Unsupported
    name = str(_only(node).get("text"))
    if not _IDENTIFIER.match(name) or name in _SPECIAL:
        raise _Unsupported
    return name


def _collection(node: Mapping[str, Any]) -> _Collection:
    kind = node.get("type")
    if kind == "TermExpression":
        term = _only(node)
        if term.get("type") == "ParenthesizedTerm":
            return _collection(_only(term))
        if term.get("type") != "InvocationTerm":
            raise _Unsupported
        inner = _only(term)
        if inner.get("type") == "FunctionInvocation":
            return _iif(inner)
        name = _identifier(inner)
        return lambda item: _member([item], name)
    if kind == "UnionExpression" and _ops(node) == ["|"]:
        left, right = (_collection(c) for c in node["children"])
        return lambda item: _distinct(left(item) + right(item))
    if kind == "InvocationExpression":
        base_node, call = node["children"]
        base = _collection(base_node)
        if call.get("type") == "MemberInvocation":
            name = _identifier(call)
            return lambda item: _member(base(item), name)
        called = _function(node)
        if called is not None:
            return _applied(base, *called)
    raise _Unsupported


def _applied(base: _Collection, name: str, params: list[Mapping[str, Any]]) -> _Collection:
    """``base.name(params)`` for the functions of the subset."""
    if name == "where" and len(params) == 1:
        keep = _predicate(params[0])
        return lambda item: [x for x in base(item) if keep(x) is True]
    if name == "select" and len(params) == 1:
        project = _collection(params[0])
        return lambda item: [y for x in base(item) for y in project(x)]
    if name == "first" and not params:
        return lambda item: base(item)[:1]
    if name == "count" and not params:
        return lambda item: [len(base(item))]
    raise _Unsupported


def _iif(invocation: Mapping[str, Any]) -> _Collection:
    """``iif(criterion, true-result[, otherwise-result])`` on the item it is evaluated on."""
    functn = _only(invocation)
    name_node, *rest = functn["children"]
    params = rest[0]["children"] if rest else []
    if str(name_node.get("text")) != "iif" or len(params) not in (2, 3):
        raise _Unsupported
    criterion = _predicate(params[0])
    chosen = _collection(params[1])
    otherwise = _collection(params[2]) if len(params) == 3 else (lambda item: [])
    return lambda item: chosen(item) if criterion(item) is True else otherwise(item)


def _member(items: list[Any], name: str) -> list[Any]:
    """Member navigation as fhirpathpy does it, for the data it reads alike."""
    out: list[Any] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        if "_" + name in item:
            raise _Unsupported  # a primitive's extension sibling: fhirpathpy merges it
        value = item.get(name)
        if isinstance(value, list):
            if any(v is None for v in value):
                raise _Unsupported  # fhirpathpy keeps nulls in arrays as nodes
            out.extend(value)
        elif value is not None:
            out.append(value)
    return out


def _members(node: Any, names: tuple[str, ...]) -> list[Any]:
    """FHIRPath member navigation (``a.b.c``): collections flatten, absent members vanish."""
    current = [node]
    for name in names:
        step: list[Any] = []
        for item in current:
            value = item.get(name) if isinstance(item, dict) else None
            if isinstance(value, list):
                step.extend(v for v in value if v is not None)
            elif value is not None:
                step.append(value)
        current = step
    return current


def evaluate(node: Mapping[str, Any], expression: str) -> list[Any]:
    """Evaluate a FHIRPath expression; plain member paths take a direct walk (same result)."""
    compiled = _path(expression)
    if isinstance(compiled, tuple):
        return _members(node, compiled)
    result = compiled(dict(node))
    return list(result) if isinstance(result, list) else [result]


#: The elements that date a resource's content, most telling first: when it was observed or
#: began, when it was recorded or asserted, when it was ordered or issued.
_DATE_ELEMENTS = (
    ("effectiveDateTime",),
    ("effectiveInstant",),
    ("effectivePeriod", "start"),
    ("onsetDateTime",),
    ("onsetPeriod", "start"),
    ("occurrenceDateTime",),
    ("performedDateTime",),
    ("period", "start"),
    ("recordedDate",),
    ("assertedDate",),
    ("authoredOn",),
    ("issued",),
    ("date",),
)


def content_date(resource: Mapping[str, Any]) -> str | None:
    """The date a resource gives its content (``effectiveDateTime``, ``onsetDateTime``,
    ``recordedDate``, ``authoredOn``…), verbatim; None when it gives none."""
    for path in _DATE_ELEMENTS:
        node: Any = resource
        for name in path:
            # a dict first: JSON is read into dicts, and the Mapping check is an ABC's (slow)
            node = node.get(name) if type(node) is dict or isinstance(node, Mapping) else None
        if isinstance(node, str) and node:
            return node
    return None


#: within one hydration (``sources_once``), each resource's Source by identity: every property
#: that reads a resource asks for it, and a call's resources do not change while it is read
_SOURCES: ContextVar[dict[int, tuple[Mapping[str, Any], Source]] | None] = ContextVar(
    "horismos_sources", default=None
)


@contextmanager
def sources_once() -> Iterator[None]:
    """Within the block, ``source_of`` builds each resource's Source once."""
    token = _SOURCES.set({})
    try:
        yield
    finally:
        _SOURCES.reset(token)


def source_of(resource: Mapping[str, Any]) -> Source:
    memo = _SOURCES.get()
    if memo is not None:
        hit = memo.get(id(resource))
        if hit is not None and hit[0] is resource:  # the same object, not a reused id
            return hit[1]
    meta = resource.get("meta") or {}
    found = Source(
        str(resource.get("resourceType")),
        str(resource.get("id")),
        meta.get("versionId"),
        meta.get("lastUpdated"),
        content_date(resource),
    )
    if memo is not None:
        memo[id(resource)] = (resource, found)
    return found


def as_codings(value: Any, canonical: Callable[[str], str] | None = None) -> list[Any]:
    """A Coding or CodeableConcept read into a string property: each coding as
    ``system|code`` (a coding without a code is no value); any other value unchanged."""
    if isinstance(value, dict) and "coding" in value:
        return codings(value, canonical)
    if isinstance(value, dict) and ("code" in value or "system" in value) and "value" not in value:
        return codings({"coding": [value]}, canonical)
    return [value]


def codings(concept: Any, canonical: Callable[[str], str] | None = None) -> list[str]:
    """A CodeableConcept's codings as ``system|code`` (codings without a code left out), each
    system as ``canonical`` names it (an OID or an older URI → the canonical URI)."""
    if not isinstance(concept, dict):
        return []
    spell = canonical or _as_written
    return [
        f"{spell(str(c.get('system', '')))}|{c.get('code', '')}"
        for c in concept.get("coding") or []
        if isinstance(c, dict) and c.get("code")
    ]


def _as_written(system: str) -> str:
    return system
