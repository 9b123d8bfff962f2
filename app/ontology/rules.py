"""Conditions, the pattern rules, steps, cards and aggregates test, and the rules that conclude
values from them (``horis:Rule``)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Literal, TypeAlias, get_args

#: A literal or an IRI (object values and enumeration individuals are IRI strings).
Value: TypeAlias = Decimal | int | str | bool

Operator = Literal[
    "is",
    "isNot",
    "in",
    "notIn",
    "greaterThan",
    "atLeast",
    "lessThan",
    "atMost",
    "isAssigned",
    "matches",
    "isA",
    "inValueSet",
    "withinPast",
    "atMostAgo",
    "atLeastAgo",
]
OPERATORS: tuple[Operator, ...] = get_args(Operator)


@dataclass(frozen=True, kw_only=True)
class Condition:
    """One pattern: ``[ horis:property P | horis:path (p1 p2) ; horis:<op> value ]``.

    ``path`` is never empty: ``horis:property P`` compiles to ``path=(P,)``. ``value`` is a
    tuple for ``in``/``notIn``, a bool for ``isAssigned``, a regex for ``matches``, a class IRI
    for ``isA``, a value set's canonical URL for ``inValueSet``, an ISO 8601 duration text for
    the time windows ``withinPast``, ``atMostAgo`` and ``atLeastAgo`` (``app.world.windows``).
    """

    path: tuple[str, ...]
    op: Operator
    value: Value | tuple[Value, ...]
    node: str | None = None  # the blank node or IRI it was read from, for error messages


@dataclass(frozen=True, kw_only=True)
class Conclusion:
    """``horis:then [ horis:property P ; horis:value V ]``."""

    property: str
    value: Value


@dataclass(frozen=True, kw_only=True)
class Rule:
    """``R a horis:Rule ; horis:about C ; horis:when (…) ; horis:then […]``."""

    iri: str
    name: str
    about: str
    when: tuple[Condition, ...]
    then: tuple[Conclusion, ...]
    order: int = 0  # document order among rules, for deterministic evaluation
    label: str | None = None  # rdfs:label: the criterion as a clinician names it
