"""A reading whose number is written another way than the mapping reads it.

A mapping that reads ``valueQuantity`` finds nothing in an Observation whose value is
``valueString`` ("162", "<30") or ``valueInteger``; that reading is there, so it is never
skipped (an older one would then decide in its place). :func:`other_value` gives what the
reading says as a Quantity to read like any other — a number with its comparator, the unit
as display text (read only when it is literally the property's unit) — or a
:class:`NotANumber` saying why it cannot be read as one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_NUMBER = re.compile(r"^\s*(<=|>=|<|>)?\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+))\s*(.*?)\s*$")
_VALUE_X = (
    "valueString",
    "valueInteger",
    "valueCodeableConcept",
    "valueBoolean",
    "valueRange",
    "valueRatio",
    "valueSampledData",
    "valueTime",
    "valueDateTime",
    "valuePeriod",
)


@dataclass(frozen=True, kw_only=True)
class NotANumber:
    """A reading that is there but is no number the property can hold."""

    shown: str  # the value as written
    why: str  # in a clinician's words


def other_value(node: Mapping[str, Any], fhir_path: str) -> dict[str, Any] | NotANumber | None:
    """What ``node`` carries in place of the ``valueQuantity`` ``fhir_path`` reads; None when
    the path reads something else or the node has no other value."""
    if fhir_path.rsplit(".", 1)[-1] != "valueQuantity":
        return None
    for element in _VALUE_X:
        if element in node:
            return _read(element, node[element])
    if not node.get("component"):  # a result with no value at all (and no reason given)
        return NotANumber(shown="", why="it has no value")
    return None


def values_in_components(node: Mapping[str, Any], fhir_path: str) -> bool:
    """Whether ``node`` carries the value ``fhir_path`` reads only in its ``component``s: it
    reads a ``value[x]``, the node has none of its own, and it has components."""
    if not fhir_path.startswith("value"):
        return False
    if any(key.startswith("value") for key in node):
        return False
    return bool(node.get("component"))


def _read(element: str, value: Any) -> dict[str, Any] | NotANumber:
    if element == "valueInteger" and isinstance(value, int) and not isinstance(value, bool):
        return {"value": value}
    if element == "valueString" and isinstance(value, str):
        parsed = _NUMBER.match(value)
        if parsed is None:
            return NotANumber(shown=value, why=f"its value is the text {value!r}, not a number")
        comparator, number, unit = parsed.groups()
        out: dict[str, Any] = {"value": number}
        if comparator:
            out["comparator"] = comparator
        if unit:
            out["unit"] = unit
        return out
    kind = element.removeprefix("value")
    return NotANumber(shown=str(value)[:80], why=f"its value is a {kind}, not a quantity")
