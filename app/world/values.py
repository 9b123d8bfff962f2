"""Literal values: normalization by datatype, exact comparison, and the condition operators.

Numbers compare exactly (``int`` and ``Decimal`` mix; floats are read through their shortest
decimal text, never as binary fractions). ``bool`` is never a number. Dates and date-times are
ISO 8601 strings; they order by their parsed instant.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from functools import lru_cache

from app.fhir_time import parse_datetime
from app.ontology.model import XSD, Value

DECIMAL = XSD + "decimal"
INTEGER = XSD + "integer"
STRING = XSD + "string"
BOOLEAN = XSD + "boolean"
DATETIME = XSD + "dateTime"
DATE = XSD + "date"
DATATYPES = frozenset({DECIMAL, INTEGER, STRING, BOOLEAN, DATETIME, DATE})


class NotOfType(ValueError):
    """The value is not of the property's datatype."""


def is_number(v: object) -> bool:
    return isinstance(v, int | Decimal) and not isinstance(v, bool)


def to_decimal(v: object) -> Decimal:
    """Read a number exactly; raise ``NotOfType`` for anything else."""
    if isinstance(v, bool):
        raise NotOfType("a boolean is not a number")
    if isinstance(v, int):
        return Decimal(v)
    if isinstance(v, float):
        v = Decimal(repr(v))
    if isinstance(v, Decimal):
        if not v.is_finite():
            raise NotOfType("not a finite number")
        return v
    raise NotOfType(f"{type(v).__name__} is not a number")


def normalize(datatype: str, v: object) -> Value:
    """Coerce ``v`` to the canonical Python form of an xsd datatype, or raise ``NotOfType``."""
    if datatype == DECIMAL:
        return to_decimal(v)
    if datatype == INTEGER:
        if isinstance(v, bool):
            raise NotOfType("a boolean is not an integer")
        if isinstance(v, int):
            return v
        d = to_decimal(v)
        if d != d.to_integral_value():
            raise NotOfType(f"{v} is not a whole number")
        return int(d)
    if datatype == BOOLEAN:
        if isinstance(v, bool):
            return v
        raise NotOfType(f"{v!r} is not a boolean")
    if datatype == STRING:
        if isinstance(v, str):
            return v
        raise NotOfType(f"{v!r} is not a string")
    if datatype == DATETIME:
        if isinstance(v, str) and "T" in v and _parse_temporal(v) is not None:
            return v
        raise NotOfType(f"{v!r} is not an ISO 8601 date-time")
    if datatype == DATE:
        if isinstance(v, str) and "T" not in v and _parse_temporal(v) is not None:
            return v
        raise NotOfType(f"{v!r} is not an ISO 8601 date")
    raise NotOfType(f"unknown datatype {datatype}")


@lru_cache(maxsize=4096)
def _parse_temporal(text: str) -> datetime | date | None:
    if "T" in text:
        return parse_datetime(text)
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def equal(a: object, b: object) -> bool:
    """Value equality where booleans never equal numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    return a == b


def compare(a: object, b: object) -> int | None:
    """-1, 0, 1, or None when the two are not ordered (different kinds, plain strings)."""
    if is_number(a) and is_number(b):
        return int((a > b) - (a < b))  # type: ignore[operator]
    if isinstance(a, str) and isinstance(b, str):
        ta, tb = _parse_temporal(a), _parse_temporal(b)
        if ta is None or tb is None or type(ta) is not type(tb):
            return None
        try:
            return int((ta > tb) - (ta < tb))
        except TypeError:  # naive against aware date-time
            return None
    return None


@lru_cache(maxsize=1024)
def compiled_regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _condition_number(v: object) -> object:
    return Decimal(repr(v)) if isinstance(v, float) else v


#: test(value, class_of) where class_of maps an object value to its class IRI (or None)
Test = Callable[[Value, Callable[[str], frozenset[str]]], bool]


def make_test(op: str, operand: object, *, members: frozenset[str] | None = None) -> Test:
    """The predicate one reached value must satisfy for operator ``op``; ``inValueSet`` tests
    a ``system|code`` string against ``members`` (the value set's codes)."""
    if op == "isAssigned":
        return lambda v, anc: True
    if op == "is":
        return lambda v, anc: equal(v, operand)
    if op == "isNot":
        return lambda v, anc: not equal(v, operand)
    if op in ("in", "notIn"):
        items = operand if isinstance(operand, tuple) else (operand,)
        if op == "in":
            return lambda v, anc: any(equal(v, x) for x in items)
        return lambda v, anc: not any(equal(v, x) for x in items)
    if op in ("greaterThan", "atLeast", "lessThan", "atMost"):
        bound = _condition_number(operand)
        ok = {
            "greaterThan": (1,),
            "atLeast": (0, 1),
            "lessThan": (-1,),
            "atMost": (-1, 0),
        }[op]
        return lambda v, anc: compare(v, bound) in ok
    if op == "matches":
        rx = compiled_regex(str(operand))
        return lambda v, anc: isinstance(v, str) and rx.search(v) is not None
    if op == "isA":
        target = str(operand)
        return lambda v, anc: isinstance(v, str) and target in anc(v)
    if op == "inValueSet":
        codes = members or frozenset()
        return lambda v, anc: isinstance(v, str) and v in codes
    raise ValueError(f"unknown operator {op}")


def parse_decimal_text(text: str) -> Decimal:
    try:
        return Decimal(text)
    except InvalidOperation as exc:
        raise NotOfType(f"{text!r} is not a decimal") from exc
