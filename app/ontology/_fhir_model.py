"""The FHIR R4B element model, read from ``fhir.resources``' own field metadata.

Verification walks FHIRPath element names through these types, so a name is checked against
the specification's models, not against a list kept here. A type is named as FHIR names it:
``Observation``, ``ObservationComponent`` (a backbone element), ``Quantity``, ``dateTime``.
A choice element (``value[x]``) appears under each typed name (``valueQuantity``) and, in
``choices``, under its base name (``value``).
"""

from __future__ import annotations

import difflib
import types
import typing
from dataclasses import dataclass
from functools import cache
from typing import Any

#: FHIR's primitive types, as the models' annotation classes name them (``DateTime`` → dateTime).
_PRIMITIVE_BOOL = "boolean"


@dataclass(frozen=True, kw_only=True)
class Element:
    """One element of a type: the types its values have, whether it repeats."""

    name: str
    types: tuple[str, ...]
    repeats: bool
    targets: tuple[str, ...] = ()  # for a Reference: the resource types it may name


@dataclass(frozen=True, kw_only=True)
class TypeInfo:
    """The elements of one FHIR type, and its choice elements by base name."""

    name: str
    elements: dict[str, Element]
    choices: dict[str, tuple[str, ...]]  # "value" -> ("valueQuantity", "valueString", …)
    is_resource: bool


def _model(name: str) -> Any:
    from fhir.resources.R4B import get_fhir_model_class

    try:
        return get_fhir_model_class(name)
    except (ValueError, ImportError, AttributeError):
        return None


def _type_name(annotation: Any) -> tuple[str | None, bool]:
    """The FHIR type an annotation holds, and whether it is a list."""
    repeats = False
    while True:
        origin = typing.get_origin(annotation)
        if origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            annotation = (
                args[0]
                if len(args) == 1
                else next((a for a in args if typing.get_origin(a) is list), args[0])
            )
        elif origin is list:
            repeats = True
            annotation = typing.get_args(annotation)[0]
        elif origin is typing.Annotated:
            meta = typing.get_args(annotation)[1]
            name = type(meta).__name__
            return name[0].lower() + name[1:], repeats
        else:
            break
    if annotation is bool:
        return _PRIMITIVE_BOOL, repeats
    name = getattr(annotation, "__name__", "")
    if name.endswith("Type") and not name.startswith("FHIRPrimitive"):
        return name[: -len("Type")], repeats
    return None, repeats


@cache
def type_info(name: str) -> TypeInfo | None:
    """The elements of FHIR type ``name`` (None for a primitive or an unknown name)."""
    if not name[:1].isupper():
        return None
    model = _model(name)
    if model is None:
        return None
    elements: dict[str, Element] = {}
    choices: dict[str, list[str]] = {}
    for field_name, field in model.model_fields.items():
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        if "__" in field_name or not extra.get("element_property"):
            continue
        type_name, repeats = _type_name(field.annotation)
        if type_name is None:
            continue
        targets = extra.get("enum_reference_types")
        # the element's JSON name: a Python keyword is a field under another name
        # (``class_fhir`` is Encounter's ``class``)
        json_name = field.alias or field_name
        elements[json_name] = Element(
            name=json_name,
            types=(type_name,),
            repeats=repeats,
            targets=tuple(t for t in targets or () if isinstance(t, str)),
        )
        base = extra.get("one_of_many")
        if isinstance(base, str):
            choices.setdefault(base, []).append(field_name)
    resource = any(c.__name__ == "Resource" for c in model.__mro__)
    return TypeInfo(
        name=name,
        elements=elements,
        choices={k: tuple(v) for k, v in choices.items()},
        is_resource=resource,
    )


def is_resource_type(name: str) -> bool:
    """Whether ``name`` is a FHIR R4B resource type (``Observation``; not ``Quantity``)."""
    info = type_info(name)
    return info is not None and info.is_resource and name not in ("Resource", "DomainResource")


def is_type(name: str) -> bool:
    """Whether ``name`` is a FHIR R4B complex type or resource."""
    return type_info(name) is not None


@cache
def _model_names() -> tuple[str, ...]:
    from fhir.resources.R4B import fhirtypes

    return tuple(
        n[: -len("Type")]
        for n in dir(fhirtypes)
        if n.endswith("Type") and n[:1].isupper() and not n.startswith("FHIRPrimitive")
    )


def closest(word: str, options: typing.Iterable[str]) -> str | None:
    """The option ``word`` most likely meant (a typo or a wrong case), if any is close."""
    pool = list(dict.fromkeys(options))
    lowered = {o.lower(): o for o in pool}
    if word.lower() in lowered:
        return lowered[word.lower()]
    found = difflib.get_close_matches(word, pool, n=1, cutoff=0.75)
    return found[0] if found else None


def closest_resource_type(word: str) -> str | None:
    """The R4B resource type ``word`` most likely meant."""
    candidates = [n for n in _model_names() if n.lower() == word.lower()] or [
        n for n in difflib.get_close_matches(word, _model_names(), n=5, cutoff=0.75)
    ]
    return next((n for n in candidates if is_resource_type(n)), None)
