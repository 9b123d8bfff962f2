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
- ``valueDate``, ``valueDateTime``, ``valueInstant``: ``@`` and the date or time as written;
- ``valueTime``: ``@T`` and the time.

Each value is first checked as R4 checks the primitive (``app.fhir_validate.primitive_problem``:
its form, its range, a day the calendar has), and a 60th second, which R4 admits and the FHIRPath
engine cannot read, is refused too: a malformed value is the caller's 400 naming ``parameters``.

Any other type (a Quantity, a Coding, a CodeableConcept, a resource …) is refused when a
condition reads it (422 naming ``parameters``): a condition here compares with one of these
literals (the FHIRPath engine does not order two quantities). A value of one type compared with
another (``%subject.birthDate < %count``, the count an integer) cannot be evaluated: the
condition's input is refused and named, the condition unknown.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from app.fhir_validate import primitive_problem
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

#: A ``parameters`` entry's value key → the R4 primitive it holds, for the types a condition
#: compares with
_KINDS = {
    "valueBoolean": "boolean",
    "valueInteger": "integer",
    "valueUnsignedInt": "unsignedInt",
    "valuePositiveInt": "positiveInt",
    "valueDecimal": "decimal",
    "valueString": "string",
    "valueMarkdown": "string",
    "valueCode": "code",
    "valueId": "id",
    "valueUri": "uri",
    "valueUrl": "uri",
    "valueCanonical": "uri",
    "valueOid": "oid",
    "valueUuid": "uuid",
    "valueDate": "date",
    "valueDateTime": "dateTime",
    "valueInstant": "instant",
    "valueTime": "time",
}
_NUMBERS = frozenset({"integer", "unsignedInt", "positiveInt", "decimal"})
_TEXTS = frozenset({"string", "code", "id", "uri", "oid", "uuid"})
#: a 60th second, which R4 admits and the FHIRPath engine cannot read
_LEAP_SECOND = re.compile(r":60(?=[.Z+-]|$)")


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


def _not_a(name: str, key: str, value: Any, why: str) -> ApplyRefused:
    return ApplyRefused(
        400,
        "value",
        f"the parameters entry {name!r} holds {value!r}, which is not a "
        f"{key.removeprefix('value')}: {why}",
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


def literal(name: str, given: Mapping[str, tuple[str, Any]]) -> str:
    """The FHIRPath literal (parenthesised) a condition reads for ``%name``; ``{}`` when the
    call gives no such parameter."""
    if name not in given:
        return f"({ABSENT})"
    key, value = given[name]
    kind = _KINDS.get(key)
    if kind is None:
        held = (
            "a resource" if key == "resource" else f"of type {key.removeprefix('value') or 'none'}"
        )
        raise ApplyRefused(
            422,
            "not-supported",
            f"a condition reads %{name}, and the parameters entry {name!r} is {held}"
            ": a condition here compares with a boolean, a number, a string, a date or a time",
            "parameters",
        )
    # R4's own check of the value (its form, its range, a day the calendar has)
    wrong = primitive_problem(kind, value)
    if wrong is None and kind in ("dateTime", "instant", "time") and _LEAP_SECOND.search(value):
        wrong = "a 60th second, which the FHIRPath engine cannot read"
    if wrong is not None:
        raise _not_a(name, key, value, wrong)
    if kind == "boolean":
        return "(true)" if value else "(false)"
    if kind in _NUMBERS:
        return f"({format(Decimal(str(value)), 'f')})"
    if kind in _TEXTS:
        return f"({_quoted(value, name, key)})"
    return f"(@T{value})" if kind == "time" else f"(@{value})"


__all__ = ["ABSENT", "RESERVED", "literal", "typed_entries"]
