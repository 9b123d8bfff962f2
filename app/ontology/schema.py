"""JSON Schema derived from the ontology for a PerceptionStep (docs/schema.md).

The output mirrors structured input, so an extraction is loaded exactly like an API
body: ``{"instances": [{"id": "p1", "class": "Patient", "heartRate": 130, "hasSymptom": ["s1"]},
{"id": "s1", "class": "ChestPain"}]}``. Per extracted class (the table of docs/schema.md):

- an ``object`` with ``id``, ``class`` and the class's properties, ``required`` from ``1..``
  cardinalities, ``additionalProperties: false``;
- ``class`` is an ``enum`` of the closed subclass tree under the extracted class (local names),
  so the model picks ``ChestPain`` and cannot invent a class;
- ``xsd:decimal``/``xsd:integer`` → ``number``/``integer`` with ``minimum``/``maximum``;
  ``horis:unit`` → ``description`` "value in …"; ``horis:pattern`` → ``pattern``;
  ``horis:oneOf`` → ``enum`` of local names; ``xsd:dateTime``/``xsd:date`` → string formats;
- an object property whose range is (in the tree of) an extracted class holds the ``id`` of
  another instance in the same output; one whose range is not extracted is left out (the model
  could not name a valid value);
- multi-valued properties (``0..*``, ``1..*``) are arrays (``minItems: 1`` for ``1..*``);
- ``horis:assignedBy horis:RulesOnly`` properties are omitted entirely.

Schemas are computed once per set of extracted classes and cached on the ontology; callers get a
copy they may extend (the Bridge adds its ``confidence`` field).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from app.ontology.classes import PropertyDef
from app.ontology.model import Ontology
from app.ontology.names import XSD, local_name

JsonSchema = dict[str, Any]

_SCALARS: dict[str, JsonSchema] = {
    XSD + "decimal": {"type": "number"},
    XSD + "integer": {"type": "integer"},
    XSD + "string": {"type": "string"},
    XSD + "boolean": {"type": "boolean"},
    XSD + "dateTime": {"type": "string", "format": "date-time"},
    XSD + "date": {"type": "string", "format": "date"},
}


def derive_schema(ontology: Ontology, extracts: Sequence[str]) -> JsonSchema:
    """The JSON Schema for extracting instances of ``extracts`` (local names or IRIs)."""
    targets = tuple(ontology.resolve(name) for name in extracts)
    unknown = [t for t in targets if t not in ontology.classes]
    if unknown:
        raise KeyError(f"not classes: {', '.join(unknown)}")
    cache = ontology._index.schemas
    if targets not in cache:
        cache[targets] = _derive(ontology, targets)
    return copy.deepcopy(cache[targets])


def _derive(o: Ontology, targets: tuple[str, ...]) -> JsonSchema:
    extracted = {c for t in targets for c in o.subclasses(t)}
    variants = [_class_schema(o, t, extracted) for t in targets]
    names = ", ".join(local_name(t) for t in targets)
    items: JsonSchema = variants[0] if len(variants) == 1 else {"anyOf": variants}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"Instances of {names}",
        "description": (
            "Every instance stated in the text. Each has an id unique in this output and a class; "
            "an object property holds the id of another instance in this output. Leave out what "
            "the text does not state."
        ),
        "type": "object",
        "properties": {"instances": {"type": "array", "items": items}},
        "required": ["instances"],
        "additionalProperties": False,
    }


def _class_schema(o: Ontology, target: str, extracted: set[str]) -> JsonSchema:
    tree = o.subclasses(target)
    cls = o.classes[target]
    props: dict[str, JsonSchema] = {
        "id": {"type": "string", "description": "an id unique within this output"},
        "class": {
            "enum": [local_name(c) for c in tree],
            "description": f"the most specific class of this {cls.label or cls.name}",
        },
    }
    required = ["id", "class"]
    ancestors = set(o.ancestors(target))
    candidates = [p for p in o.properties.values() if p.domain in ancestors or p.domain in tree]
    for p in candidates:
        if p.rules_only:
            continue
        item = _value_schema(o, p, extracted)
        if item is None:
            continue
        if p.single_valued:
            props[p.name] = item
        else:
            array: JsonSchema = {"type": "array", "items": item}
            if p.required:
                array["minItems"] = 1
            props[p.name] = array
        if p.required and p.domain in ancestors:
            required.append(p.name)
    return {
        "type": "object",
        "title": cls.name,
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }


def _value_schema(o: Ontology, p: PropertyDef, extracted: set[str]) -> JsonSchema | None:
    if p.one_of:
        schema: JsonSchema = {"enum": [local_name(str(v)) for v in p.one_of]}
    elif p.is_object:
        reachable = [c for c in o.subclasses(p.range) if c in extracted]
        reachable += [c for c in o.ancestors(p.range) if c in extracted]
        if not reachable:
            return None
        return {
            "type": "string",
            "description": _describe(
                p, f"the id of a {local_name(p.range)} instance in this output"
            ),
        }
    else:
        schema = dict(_SCALARS.get(p.range, {"type": "string"}))
    if p.min is not None:
        schema["minimum"] = _number(p.min)
    if p.max is not None:
        schema["maximum"] = _number(p.max)
    if p.pattern is not None:
        schema["pattern"] = p.pattern
    unit = f"value in {p.unit}" if p.unit else None
    text = _describe(p, unit)
    if text:
        schema["description"] = text
    return schema


def _describe(p: PropertyDef, detail: str | None) -> str | None:
    parts = [x for x in (p.label, detail) if x]
    return "; ".join(parts) if parts else None


def _number(value: Decimal) -> int | float:
    return int(value) if value == value.to_integral_value() else float(value)
