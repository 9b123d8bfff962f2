"""FHIR R4 JSON checked by shapes compiled once from the R4B model definitions, with no coercion.

The ``fhir.resources`` models read a payload the way pydantic reads Python input: ``"12"`` is
taken for the decimal 12, and a ``code`` is checked for its form but not for the value set its
element is bound to. R4 refuses both. This module compiles, per resource type, what each element
is (its JSON type, whether it repeats, whether it is required, the choice group it belongs to,
the codes a required binding allows) from the models' own metadata, and checks a resource
against it as JSON:

- every element's JSON type exactly (a string is not a number, a number is not a string, a
  boolean is neither), arrays where the element repeats and only there, no empty objects or
  strings (an empty array is read as the element's absence: searches are sent with
  ``"entry": []``, and it can mean nothing else), no ``null`` as a value or in an array
  (unless its ``_element`` partner holds an extension at that place), no element R4 does not
  define;
- a choice (``value[x]``) given at most once, and exactly once where R4 requires it;
- required elements present;
- primitive forms: calendar dates, dateTimes and instants (a time needs its offset), times,
  ids, codes without surrounding or doubled whitespace, uris, 32-bit integers, decimals;
- the codes of the required bindings on modifier elements such as ``Observation.status``, listed
  in ``required_bindings.json`` beside this module.

A deployment's resource types are compiled when it is loaded (:func:`prepare`); any other type
(an entry of a search, a contained resource) is compiled the first time it is met, once per
process. What a shape refuses is given as (element path relative to the resource, rule).
"""

from __future__ import annotations

import json
import math
import re
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any

from fhir.resources.R4B import get_fhir_model_class

from app.fhir_time import parse_datetime

__all__ = ["Problem", "known_type", "prepare", "primitive_problem", "problems", "required_codes"]

#: (element path relative to the resource, e.g. ``.valueQuantity.value``; the rule it breaks)
Problem = tuple[str, str]

#: Problems reported per resource, at most (the first ones met).
MAX_PROBLEMS = 5
#: Objects nested deeper than this are refused whole.
MAX_DEPTH = 64
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1

_BINDINGS = Path(__file__).with_name("required_bindings.json")


def _load_codes() -> dict[str, frozenset[str]]:
    data = json.loads(_BINDINGS.read_text(encoding="utf-8"))
    return {path: frozenset(codes) for path, codes in data["codes"].items()}


_CODES = _load_codes()


def _load_concepts() -> dict[str, dict[str, tuple[str, frozenset[str]]]]:
    """Resource type → CodeableConcept element → (the binding's code system, its codes)."""
    data = json.loads(_BINDINGS.read_text(encoding="utf-8"))
    out: dict[str, dict[str, tuple[str, frozenset[str]]]] = {}
    for path, binding in data.get("concepts", {}).items():
        owner, _, element = path.partition(".")
        out.setdefault(owner, {})[element] = (binding["system"], frozenset(binding["codes"]))
    return out


_CONCEPTS = _load_concepts()


def required_codes() -> dict[str, frozenset[str]]:
    """Element path (``Observation.status``) → the codes its required binding allows."""
    return dict(_CODES)


# --- primitive forms (the regular expressions of the R4 datatypes page) ---------------------

_YEAR = r"([0-9]([0-9]([0-9][1-9]|[1-9]0)|[1-9]00)|[1-9]000)"
_MONTH = r"(0[1-9]|1[0-2])"
_DAY = r"(0[1-9]|[1-2][0-9]|3[0-1])"
_DATE = rf"{_YEAR}(-{_MONTH}(-{_DAY})?)?"
_TIME = r"([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?"
_ZONE = r"(Z|(\+|-)((0[0-9]|1[0-3]):[0-5][0-9]|14:00))"
_FORMS: dict[str, re.Pattern[str]] = {
    "date": re.compile(_DATE),
    # a time only after a whole date, as R4's own expression nests it (not ``2024T10:00:00Z``)
    "dateTime": re.compile(rf"{_YEAR}(-{_MONTH}(-{_DAY}(T{_TIME}{_ZONE})?)?)?"),
    "instant": re.compile(rf"{_YEAR}-{_MONTH}-{_DAY}T{_TIME}{_ZONE}"),
    "time": re.compile(_TIME),
    "id": re.compile(r"[A-Za-z0-9\-.]{1,64}"),
    "code": re.compile(r"[^\s]+( [^\s]+)*"),
    "uri": re.compile(r"\S+"),
    "oid": re.compile(r"urn:oid:[0-2](\.(0|[1-9][0-9]*))+"),
    "uuid": re.compile(r"urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"),
    "base64Binary": re.compile(r"(\s*([0-9a-zA-Z+/=]){4}\s*)+"),
}
_SAID = {
    "date": "a date (YYYY, YYYY-MM or YYYY-MM-DD)",
    "dateTime": "a date, or a date and time with its offset",
    "instant": "a date and time to the second with its offset",
    "time": "a time of day (hh:mm:ss)",
    "id": "an id (1 to 64 letters, digits, '-' or '.')",
    "code": "a code (no leading, trailing or repeated spaces)",
    "uri": "a uri (no spaces)",
    "oid": "an OID (urn:oid:…)",
    "uuid": "a UUID (urn:uuid:…)",
    "base64Binary": "base64 data",
}
#: the models' annotation markers → R4 primitive type
_MARKERS = {
    "Id": "id",
    "Uri": "uri",
    "Url": "uri",
    "Canonical": "uri",
    "Oid": "oid",
    "UuidVersion": "uuid",
    "Code": "code",
    "String": "string",
    "Markdown": "string",
    "Xhtml": "xhtml",
    "DateTime": "dateTime",
    "Instant": "instant",
    "Date": "date",
    "Time": "time",
    "Integer": "integer",
    "PositiveInt": "positiveInt",
    "UnsignedInt": "unsignedInt",
    "Decimal": "decimal",
    "EncodedBytes": "base64Binary",
}


def _calendar(text: str) -> bool:
    """Whether a date or dateTime the form admits names a day the calendar has."""
    if len(text) < 10:
        return True  # a year, or a year and month: the form is enough
    if len(text) == 10:
        try:
            date.fromisoformat(text)
        except ValueError:
            return False
        return True
    return parse_datetime(text) is not None


def primitive_problem(kind: str, value: Any) -> str | None:
    """Why ``value`` (JSON) is not a valid R4 ``kind``, or None."""
    if kind == "boolean":
        return None if value is True or value is False else "must be true or false"
    if kind in ("integer", "positiveInt", "unsignedInt"):
        if type(value) is not int:
            return "must be a whole number, not " + _json_kind(value)
        low = 1 if kind == "positiveInt" else 0 if kind == "unsignedInt" else _INT_MIN
        if not low <= value <= _INT_MAX:
            return f"must be a whole number from {low} to {_INT_MAX}"
        return None
    if kind == "decimal":
        if type(value) is int or type(value) is float:
            return None if math.isfinite(value) else "must be a finite number"
        if type(value) is Decimal:
            return None if value.is_finite() else "must be a finite number"
        return "must be a number, not " + _json_kind(value)
    if type(value) is not str:
        return "must be a string, not " + _json_kind(value)
    if not value:
        return "must not be empty"
    if kind in ("string", "xhtml"):
        if len(value) > 1_048_576:
            return "is longer than 1 MB"
        if kind == "xhtml" and not value.startswith("<div"):
            return "must be an xhtml div"
        return None
    form = _FORMS[kind]
    if form.fullmatch(value) is None:
        return f"must be {_SAID[kind]}"
    if kind in ("date", "dateTime", "instant") and not _calendar(value):
        return "is not a date the calendar has"
    return None


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float | Decimal):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


# --- compiled shapes --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Field:
    many: bool
    primitive: str | None  # the R4 primitive type, or None for a complex element
    target: str | None  # complex: the model's name; "Resource": any resource by resourceType
    codes: frozenset[str] | None = None  # a required binding's codes


@dataclass(frozen=True, slots=True)
class _Shape:
    name: str
    resource: bool  # carries resourceType
    fields: dict[str, _Field]
    #: element name → its "_name" partner (primitives only)
    partners: dict[str, str]
    required: tuple[str, ...]  # complex elements that must be present
    required_primitives: tuple[str, ...]  # a value or its extension must be present
    choices: tuple[tuple[str, tuple[str, ...], bool], ...]  # (group, members, required)


_SHAPES: dict[str, _Shape] = {}


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """The element type an annotation names, and whether the element repeats."""
    many = False
    while True:
        origin = typing.get_origin(annotation)
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if origin is typing.Union or (
            origin is not None and str(origin) == "<class 'types.UnionType'>"
        ):
            lists = [a for a in args if typing.get_origin(a) in (list, typing.List)]  # noqa: UP006
            annotation = lists[0] if lists else args[0]
            continue
        if origin in (list, typing.List):  # noqa: UP006
            many = True
            annotation = args[0]
            continue
        return annotation, many


def _field(owner: str, name: str, annotation: Any, extra: dict[str, Any]) -> _Field:
    element, many = _unwrap(annotation)
    if typing.get_origin(element) is typing.Annotated:
        marker = type(typing.get_args(element)[1]).__name__
        kind = _MARKERS.get(marker, "string")
        codes = _CODES.get(f"{owner}.{name}") if kind == "code" else None
        return _Field(many=many, primitive=kind, target=None, codes=codes)
    if element is bool:
        return _Field(many=many, primitive="boolean", target=None)
    if element is str:
        return _Field(many=many, primitive="string", target=None)
    type_name = getattr(element, "__name__", str(element))
    target = type_name.removesuffix("Type")
    return _Field(many=many, primitive=None, target=target)


#: what a primitive's ``_element`` holds (FHIR R4 json.html#primitive): the models do not mark
#: them as elements, yet the FHIR specification's own examples carry them (``_birthDate`` with
#: the birth time extension)
_PRIMITIVE_ELEMENTS = {("FHIRPrimitiveExtension", "id"), ("FHIRPrimitiveExtension", "extension")}


def _compile(name: str) -> _Shape:
    """The shape of the model ``name`` (a resource, datatype or backbone element)."""
    shape = _SHAPES.get(name)
    if shape is not None:
        return shape
    model = get_fhir_model_class(name)
    fields: dict[str, _Field] = {}
    partners: dict[str, str] = {}
    required: list[str] = []
    required_primitives: list[str] = []
    groups: dict[str, tuple[list[str], bool]] = {}
    for attr, info in model.model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        key = info.alias or attr
        if attr.endswith("__ext"):
            continue
        if not extra.get("element_property") and (name, key) not in _PRIMITIVE_ELEMENTS:
            continue  # fhir_comments and the like: not R4 JSON
        spec = _field(name, key, info.annotation, extra)
        fields[key] = spec
        ext = model.model_fields.get(f"{attr}__ext")
        if ext is not None:
            partners[key] = ext.alias or f"_{key}"
        if extra.get("element_required") or info.is_required():
            (required_primitives if spec.primitive else required).append(key)
        group = extra.get("one_of_many")
        if isinstance(group, str):
            members, _ = groups.setdefault(group, ([], False))
            members.append(key)
            if extra.get("one_of_many_required"):
                groups[group] = (members, True)
    resource = "resourceType" not in fields and _is_resource(model)
    shape = _Shape(
        name=name,
        resource=resource,
        fields=fields,
        partners=partners,
        required=tuple(required),
        required_primitives=tuple(required_primitives),
        choices=tuple((g, tuple(m), need) for g, (m, need) in groups.items()),
    )
    _SHAPES[name] = shape
    return shape


def _is_resource(model: type) -> bool:
    return any(base.__name__ == "Resource" for base in model.__mro__)


@lru_cache(maxsize=512)
def known_type(name: str) -> bool:
    """Whether ``name`` is a resource type of R4 as the models know it."""
    try:
        model = get_fhir_model_class(name)
    except (KeyError, ValueError):
        return False
    return _is_resource(model)


def prepare(resource_types: Iterable[str]) -> None:
    """Compile the shapes of ``resource_types`` and every element type they reach, now (a
    deployment at load), so no hook call pays for it."""
    todo = [t for t in resource_types if known_type(t)]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        shape = _compile(name)
        todo.extend(f.target for f in shape.fields.values() if f.target and f.target != "Resource")


# --- checking ---------------------------------------------------------------------------------


#: where a value is: the path is rendered (``.code.coding[0]``) only for a problem, not built
#: for every element checked
_At = str | tuple["_At", str | int]


def _render(at: _At) -> str:
    parts: list[str] = []
    while isinstance(at, tuple):
        at, part = at
        parts.append(f"[{part}]" if isinstance(part, int) else f".{part}")
    return at + "".join(reversed(parts))


class _Full(Exception):
    """Enough problems found: stop looking."""


class _Check:
    __slots__ = ("found", "outer")

    def __init__(self, *, outer: bool = False) -> None:
        self.found: list[Problem] = []
        #: a Bundle without its entries' resources (each is checked on its own)
        self.outer = outer

    def say(self, at: _At, why: str) -> None:
        self.found.append((_render(at), why))
        if len(self.found) >= MAX_PROBLEMS:
            raise _Full

    def resource(self, value: Any, at: _At, depth: int) -> None:
        if not isinstance(value, dict):
            self.say(at, "must be a resource, not " + _json_kind(value))
            return
        rtype = value.get("resourceType")
        if not isinstance(rtype, str) or not known_type(rtype):
            self.say((at, "resourceType"), "names no FHIR R4 resource type")
            return
        self.element(_compile(rtype), value, at, depth)

    def element(self, shape: _Shape, value: dict[str, Any], at: _At, depth: int) -> None:
        if depth > MAX_DEPTH:
            self.say(at, "nested too deeply")
            return
        if not value:
            self.say(at, "must not be empty")
            return
        fields = shape.fields
        partners = shape.partners
        for key, item in value.items():
            spec = fields.get(key)
            if (
                self.outer
                and depth == 1
                and key == "resource"
                and shape.name == "BundleEntry"
                and isinstance(item, dict)
                and isinstance(item.get("resourceType"), str)
            ):
                continue
            if spec is None:
                if key == "resourceType" and shape.resource:
                    continue
                if key.startswith("_") and key[1:] in partners:
                    self.partner(fields[key[1:]], item, value.get(key[1:]), (at, key), depth)
                    continue
                self.say((at, key), f"is not an element of R4 {shape.name}")
                continue
            where: _At = (at, key)
            if item is None:
                self.say(where, "must not be null")
            elif spec.many:
                if type(item) is not list:
                    self.say(where, "must be a list")
                else:
                    partner = value.get(partners[key]) if key in partners else None
                    for i, one in enumerate(item):
                        if one is None:
                            if not (
                                type(partner) is list
                                and i < len(partner)
                                and partner[i] is not None
                            ):
                                self.say((where, i), "must not be null")
                            continue
                        self.one(spec, one, (where, i), depth)
            else:
                if type(item) is list:
                    self.say(where, "must be a single value, not a list")
                else:
                    self.one(spec, item, where, depth)
        for key, (system, codes) in _CONCEPTS.get(shape.name, {}).items():
            self.concept(value.get(key), system, codes, (at, key))
        for key in shape.required:
            if not value.get(key):
                self.say((at, key), "is required")
        for key in shape.required_primitives:
            if value.get(key) is None and value.get(partners.get(key, "")) is None:
                self.say((at, key), "is required")
        for group, members, need in shape.choices:
            given = [m for m in members if m in value or (m in partners and partners[m] in value)]
            if len(given) > 1:
                self.say((at, given[1]), f"{group}[x] is given more than once")
            elif need and not given:
                self.say((at, f"{group}[x]"), "is required")

    def concept(self, item: Any, system: str, codes: frozenset[str], at: _At) -> None:
        """A CodeableConcept under a required binding: a coding in the binding's code system
        carries one of its codes (``Active`` is not ``active``)."""
        codings = item.get("coding") if type(item) is dict else None
        for i, coding in enumerate(codings if type(codings) is list else ()):
            if type(coding) is not dict or coding.get("system") != system:
                continue
            code = coding.get("code")
            if type(code) is str and code not in codes:
                allowed = ", ".join(sorted(codes))
                self.say(
                    (((at, "coding"), i), "code"),
                    f"{code!r} is not a code R4 allows here ({allowed})",
                )

    def one(self, spec: _Field, item: Any, at: _At, depth: int) -> None:
        if spec.primitive is not None:
            why = primitive_problem(spec.primitive, item)
            if why is not None:
                self.say(at, why)
            elif spec.codes is not None and item not in spec.codes:
                allowed = ", ".join(sorted(spec.codes))
                self.say(at, f"{item!r} is not a code R4 allows here ({allowed})")
            return
        if spec.target == "Resource":
            self.resource(item, at, depth + 1)
        elif type(item) is not dict:
            self.say(at, "must be an object, not " + _json_kind(item))
        else:
            self.element(_compile(spec.target or "Element"), item, at, depth + 1)

    def partner(self, spec: _Field, item: Any, value: Any, at: _At, depth: int) -> None:
        """``_element``: the id and extensions of a primitive (a list of them, in step with
        the values, where the element repeats)."""
        ext = _compile("FHIRPrimitiveExtension")
        if spec.many:
            if type(item) is not list:
                self.say(at, "must be a list")
                return
            if type(value) is list and len(value) != len(item):
                self.say(at, "must have one entry per value")
            for i, one in enumerate(item):
                if one is None:
                    if not (type(value) is list and i < len(value) and value[i] is not None):
                        self.say((at, i), "must not be null")
                elif type(one) is not dict:
                    self.say((at, i), "must be an object, not " + _json_kind(one))
                else:
                    self.element(ext, one, (at, i), depth + 1)
        elif type(item) is not dict:
            self.say(at, "must be an object, not " + _json_kind(item))
        else:
            self.element(ext, item, at, depth + 1)


def problems(resource: Any, *, outer: bool = False) -> list[Problem]:
    """What makes ``resource`` (parsed JSON) not valid FHIR R4, the first few; [] when valid.
    ``outer``: a Bundle's own elements only, its entries' resources left to be checked each on
    its own."""
    check = _Check(outer=outer)
    try:
        check.resource(resource, "", 0)
    except _Full:
        pass
    except RecursionError:
        return [("", "nested too deeply")]
    return check.found
