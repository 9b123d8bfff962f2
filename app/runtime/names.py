"""Name handling shared by the executors: local names ↔ IRIs, JSON renderings of values."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from app.ontology.model import Condition, Ontology, Value, local_name


def iri_for(ontology: Ontology, name: str) -> str:
    """A local name (or an IRI) → the IRI of the class, property or individual it names.

    Unknown names become IRIs in the deployment namespace, so that the World's gate — not this
    helper — is what rejects them (``unknown-class``, ``unknown-property``).
    """
    if "://" in name or name.startswith("urn:"):
        return name
    candidate = ontology.namespace + name
    for table in (ontology.classes, ontology.properties, ontology.individuals):
        if candidate in table:
            return candidate
    for table in (ontology.classes, ontology.properties, ontology.individuals):
        for iri, item in table.items():
            if item.name == name:
                return iri
    return candidate


def is_subclass(ontology: Ontology, cls: str, ancestor: str) -> bool:
    """Reflexive, transitive ``rdfs:subClassOf``."""
    seen: set[str] = set()
    todo = [cls]
    while todo:
        c = todo.pop()
        if c == ancestor:
            return True
        if c in seen:
            continue
        seen.add(c)
        found = ontology.classes.get(c)
        if found is not None:
            todo.extend(found.parents)
    return False


def show(ontology: Ontology, value: Value | None) -> Any:
    """A value as JSON shows it: ontology IRIs by local name, decimals as numbers."""
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, str) and (
        value in ontology.individuals or value in ontology.classes or value in ontology.properties
    ):
        return local_name(value)
    return value


def condition_json(ontology: Ontology, cond: Condition) -> dict[str, Any]:
    value = cond.value
    shown: Any = (
        [show(ontology, v) for v in value] if isinstance(value, tuple) else show(ontology, value)
    )
    return {"path": [local_name(p) for p in cond.path], "op": cond.op, "value": shown}
