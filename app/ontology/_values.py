"""Turning RDF literals into the compiled model's values, with type errors as problems."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from rdflib import BNode, Literal, URIRef
from rdflib.namespace import XSD
from rdflib.term import Node

from app.ontology.rules import Value

INTEGER_TYPES = frozenset(
    XSD[t]
    for t in (
        "integer",
        "int",
        "long",
        "short",
        "byte",
        "nonNegativeInteger",
        "positiveInteger",
        "negativeInteger",
        "nonPositiveInteger",
        "unsignedInt",
        "unsignedLong",
        "unsignedShort",
        "unsignedByte",
    )
)
NUMBER_TYPES = INTEGER_TYPES | {XSD.decimal, XSD.double, XSD.float}
TIME_TYPES = frozenset({XSD.dateTime, XSD.date, XSD.dateTimeStamp})
RANGE_DATATYPES = frozenset(
    XSD[t] for t in ("decimal", "integer", "string", "boolean", "dateTime", "date")
)

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(ms|s|m|min|h)$")
_ISO_DURATION = re.compile(
    r"^P(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?$"
)
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def is_string(node: Node) -> bool:
    return isinstance(node, Literal) and (node.datatype is None or node.datatype == XSD.string)


def as_string(node: Node) -> str | None:
    return str(node) if is_string(node) else None


def as_bool(node: Node) -> bool | None:
    if isinstance(node, Literal) and node.datatype == XSD.boolean and not node.ill_typed:
        return bool(node.toPython())
    return None


def as_number(node: Node) -> Decimal | int | None:
    """An integer literal as int, a decimal/double as Decimal; anything else None."""
    if not isinstance(node, Literal) or node.datatype not in NUMBER_TYPES or node.ill_typed:
        return None
    if node.datatype in INTEGER_TYPES:
        return int(node.toPython())
    try:
        return Decimal(str(node))
    except InvalidOperation:
        return None


def as_time(node: Node) -> str | None:
    """A dateTime or date literal, kept as its lexical form."""
    if isinstance(node, Literal) and node.datatype in TIME_TYPES and not node.ill_typed:
        return str(node)
    return None


def as_value(node: Node) -> Value | None:
    """Any literal or IRI as a model Value (dateTime/date keep their lexical form)."""
    if isinstance(node, URIRef):
        return str(node)
    if isinstance(node, BNode) or not isinstance(node, Literal):
        return None
    if node.ill_typed:
        return None
    if node.datatype == XSD.boolean:
        return as_bool(node)
    if node.datatype in NUMBER_TYPES:
        return as_number(node)
    if node.datatype in TIME_TYPES:
        return str(node)
    if node.datatype is None or node.datatype == XSD.string:
        return str(node)
    return None


def parse_duration(node: Node) -> float | None:
    """``"5s"``, ``"500ms"``, ``"2m"``, ``"4h"``, ISO 8601 ``"PT5S"``, or a number of seconds."""
    number = as_number(node)
    if number is not None:
        return float(number)
    text = as_string(node)
    if text is None:
        return None
    text = text.strip()
    m = _DURATION.match(text)
    if m:
        return float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
    m = _ISO_DURATION.match(text)
    if m and text not in ("P", "PT") and not text.endswith("T"):
        days, hours, minutes, seconds = (float(g) if g else 0.0 for g in m.groups())
        return days * 86400 + hours * 3600 + minutes * 60 + seconds
    return None


_ISO_FIXED = re.compile(
    r"^P(?:(\d+(?:\.\d+)?)W)?(?:(\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?$"
)
_ISO_CALENDAR = re.compile(r"^P(?:\d+(?:\.\d+)?[YM])")


def parse_iso_duration(node: Node) -> float | None:
    """An ISO 8601 duration of fixed length (weeks, days, hours, minutes, seconds) in seconds;
    None for anything else, including years and months, whose length depends on the date."""
    text = as_string(node)
    if text is None:
        return None
    text = text.strip()
    m = _ISO_FIXED.match(text)
    if m is None or text in ("P", "PT") or text.endswith("T"):
        return None
    weeks, days, hours, minutes, seconds = (float(g) if g else 0.0 for g in m.groups())
    return weeks * 604800 + days * 86400 + hours * 3600 + minutes * 60 + seconds


def is_calendar_duration(node: Node) -> bool:
    """Whether the text is an ISO 8601 duration in years or months (``"P1Y"``, ``"P3M"``)."""
    text = as_string(node)
    return text is not None and _ISO_CALENDAR.match(text.strip()) is not None


def valid_regex(text: str) -> bool:
    try:
        re.compile(text)
    except re.error:
        return False
    return True


_MEMBER_PATH = re.compile(r"^[A-Za-z][A-Za-z0-9]*(\.[A-Za-z][A-Za-z0-9]*)*$")


def valid_member_path(text: str) -> bool:
    """A plain FHIR element path (``medicationReference``, ``dispenseRequest.quantity``)."""
    return _MEMBER_PATH.match(text) is not None


def valid_coding(text: str) -> bool:
    system, sep, code = text.partition("|")
    return bool(sep and system and code)


XSD_NS = "http://www.w3.org/2001/XMLSchema#"
