"""An ``$apply`` call's ``parameters`` as the values an applicability condition reads.

A condition reading ``%name`` (a ``parameters`` entry of the call, not one of the call's own
resources) compares the subject's record with a value the caller gave: ``%subject.birthDate <
%cutoff``. The value is written into the condition as a FHIRPath literal, in parentheses, before
the plan is compiled (``app.plandefinition.conditions``), so the compiled deployment — kept for
replay, named by the digest of its whole text — says which value decided: two calls giving two
values run two deployments. A parameter the call does not give is the empty collection ``{}``:
the condition is then unknown and named (an ``exists()`` on it is false, as FHIRPath says), never
read as false. The entry's type decides the literal:

- ``valueBoolean``: ``true``, ``false``;
- ``valueInteger``, ``valueUnsignedInt``, ``valuePositiveInt``, ``valueDecimal``: the number
  in decimal notation;
- ``valueString``, ``valueCode``, ``valueId``, ``valueUri``, ``valueUrl``, ``valueCanonical``,
  ``valueOid``, ``valueUuid``, ``valueMarkdown``: a quoted string, quotes escaped (a value
  holding a backslash is refused: the FHIRPath engine reads ``\\n``, ``\\u0041`` … before
  ``\\\\``, so no escaping compares it exactly);
- ``valueDate``, ``valueDateTime``, ``valueInstant``: ``@`` and the date or time as written
  (R4's own pattern, and a day and a second the calendar has);
- ``valueTime``: ``@T`` and the time.

Any other type (a Quantity, a Coding, a CodeableConcept, a resource …) is refused when a
condition reads it (422 naming ``parameters``): a condition here compares with one of these
literals (the FHIRPath engine does not order two quantities). A value of one type compared with
another (``%subject.birthDate < %count``, the count an integer) cannot be evaluated: the
condition's input is refused and named, the condition unknown.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date, datetime, time
from decimal import Decimal, InvalidOperation
from typing import Any

from app.plandefinition.refusals import ApplyRefused

#: The literal a parameter the call does not give reads as: FHIRPath's empty collection.
ABSENT = "{}"
#: FHIRPath's own environment variables, the call resources a condition does not read, and the
#: names ``$apply`` and the hooks give what a condition here does not read (a slip for
#: ``%subject`` or a context value, refused rather than read as an absent parameter): never an
#: ``$apply`` parameter's name
RESERVED = frozenset(
    {
        "context",
        "resource",
        "rootResource",
        "ucum",
        "sct",
        "loinc",
        "organization",
        "action",
        "patient",
        "user",
        "userType",
        "userLanguage",
        "userTaskContext",
        "setting",
        "settingContext",
        "location",
    }
)

_TEXT = frozenset(
    {
        "valueString",
        "valueCode",
        "valueId",
        "valueUri",
        "valueUrl",
        "valueCanonical",
        "valueOid",
        "valueUuid",
        "valueMarkdown",
    }
)
_WHOLE = frozenset({"valueInteger", "valueUnsignedInt", "valuePositiveInt"})
#: R4's regular expressions for date, dateTime and instant, time
_DATE_TIME = re.compile(
    r"([0-9]([0-9]([0-9][1-9]|[1-9]0)|[1-9]00)|[1-9]000)(-(0[1-9]|1[0-2])(-(0[1-9]|[1-2][0-9]|"
    r"3[0-1])(T([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?(Z|(\+|-)((0[0-9]|1[0-3])"
    r":[0-5][0-9]|14:00)))?)?)?"
)
_TIME = re.compile(r"([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?")
_SUPPORTED = (
    _TEXT
    | _WHOLE
    | {
        "valueBoolean",
        "valueDecimal",
        "valueDate",
        "valueDateTime",
        "valueInstant",
        "valueTime",
    }
)


def typed_entries(parameters: Any) -> dict[str, tuple[str, Any]]:
    """Each named entry of a ``Parameters`` resource (already checked to be one): its name →
    (the key its value is under — ``valueDate``, ``resource`` … — and the value)."""
    out: dict[str, tuple[str, Any]] = {}
    for p in (parameters or {}).get("parameter") or ():
        if not isinstance(p, dict) or not isinstance(p.get("name"), str):
            continue
        key = next((k for k in p if k.startswith("value") or k == "resource"), "")
        out[p["name"]] = (key, p.get(key))
    return out


def _number(value: Any, name: str, key: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _not_a(name, key, value)
    if key in _WHOLE and not (isinstance(value, int) or float(value).is_integer()):
        raise _not_a(name, key, value)
    if (key == "valueUnsignedInt" and value < 0) or (key == "valuePositiveInt" and value < 1):
        raise _not_a(name, key, value)
    try:
        written = Decimal(str(value))
    except InvalidOperation as exc:  # nan, inf
        raise _not_a(name, key, value) from exc
    if not written.is_finite():
        raise _not_a(name, key, value)
    return format(written, "f")


def _not_a(name: str, key: str, value: Any) -> ApplyRefused:
    return ApplyRefused(
        400,
        "value",
        f"the parameters entry {name!r} holds {value!r}, which is not a "
        f"{key.removeprefix('value')}",
        "parameters",
    )


def _quoted(text: str, name: str, key: str) -> str:
    if "\\" in text:
        # the FHIRPath engine reads \n, \t, \uXXXX … before \\: no escaping of a backslash
        # reads back as written, and a changed value would decide (a confident wrong answer)
        raise ApplyRefused(
            400,
            "value",
            f"the parameters entry {name!r} holds a backslash, which a condition here cannot "
            f"compare exactly ({key.removeprefix('value')} {text!r})",
            "parameters",
        )
    return "'" + text.replace("'", "\\'") + "'"


def _moment(value: str, name: str, key: str) -> str:
    """``value`` when it is the date, time or date and time its pattern says and the calendar
    has (R4's pattern lets 2020-02-30 and a 60th second through, which the engine then cannot
    read: the caller's value, named, not the record's)."""
    try:
        if key == "valueTime":
            if not _TIME.fullmatch(value):
                raise ValueError(value)
            time.fromisoformat(value)
        elif not _DATE_TIME.fullmatch(value):
            raise ValueError(value)
        elif "T" in value:
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        elif len(value) == 10:
            date.fromisoformat(value)
    except ValueError as exc:
        raise _not_a(name, key, value) from exc
    return value


def literal(name: str, given: Mapping[str, tuple[str, Any]]) -> str:
    """The FHIRPath literal (parenthesised) a condition reads for ``%name``; ``{}`` when the
    call gives no such parameter."""
    if name not in given:
        return f"({ABSENT})"
    key, value = given[name]
    if key == "valueBoolean" and isinstance(value, bool):
        return "(true)" if value else "(false)"
    if key in _WHOLE or key == "valueDecimal":
        return f"({_number(value, name, key)})"
    if key in _TEXT and isinstance(value, str):
        return f"({_quoted(value, name, key)})"
    if key in ("valueDate", "valueDateTime", "valueInstant") and isinstance(value, str):
        return f"(@{_moment(value, name, key)})"
    if key == "valueTime" and isinstance(value, str):
        return f"(@T{_moment(value, name, key)})"
    if key in _SUPPORTED:  # a supported type holding something else
        raise _not_a(name, key, value)
    kind = "a resource" if key == "resource" else f"of type {key.removeprefix('value') or 'none'}"
    raise ApplyRefused(
        422,
        "not-supported",
        f"a condition reads %{name}, and the parameters entry {name!r} is {kind}"
        ": a condition here compares with a boolean, a number, a string, a date or a time",
        "parameters",
    )


__all__ = ["ABSENT", "RESERVED", "literal", "typed_entries"]
