"""Name handling shared by the executors: local names ↔ IRIs, JSON renderings of values."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from app.ontology.model import Condition, Ontology, Value, local_name


def namespace_of(iri: str) -> str:
    """``https://x/y#Name`` → ``https://x/y#`` (or up to the last ``/``)."""
    for sep in ("#", "/"):
        if sep in iri:
            return iri.rsplit(sep, 1)[0] + sep
    return iri


def iri_for(ontology: Ontology, name: str, namespace: str | None = None) -> str:
    """A local name (or an IRI) → the IRI of the class, property or individual it names,
    preferring ``namespace`` (the running workflow's) when several deployments are loaded.

    Unknown names become IRIs in that namespace, so that the World's gate — not this helper —
    is what rejects them (``unknown-class``, ``unknown-property``).
    """
    if "://" in name or name.startswith("urn:"):
        return name
    for ns in (namespace, ontology.namespace):
        if ns is None:
            continue
        candidate = ns + name
        for table in (ontology.classes, ontology.properties, ontology.individuals):
            if candidate in table:
                return candidate
    for table in (ontology.classes, ontology.properties, ontology.individuals):
        for iri, item in table.items():
            if item.name == name:
                return iri
    return (namespace or ontology.namespace) + name


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


def qualify_structured(
    ontology: Ontology, data: Mapping[str, Any], namespace: str
) -> dict[str, Any]:
    """Structured input (docs/schema.md) with its local names resolved in ``namespace`` first.

    When several deployments are loaded as one ontology, a local name such as ``Patient`` may
    exist in more than one; the running workflow's namespace decides. Names that resolve to
    nothing are left as written, so the World's gate reports them as the caller wrote them.
    """
    instances = data.get("instances")
    if not isinstance(instances, list):
        return dict(data)
    known = (ontology.classes, ontology.properties, ontology.individuals)

    def resolve(name: str) -> str:
        iri = iri_for(ontology, name, namespace)
        return iri if any(iri in table for table in known) else name

    out: list[Any] = []
    for entry in instances:
        if not isinstance(entry, Mapping):
            out.append(entry)
            continue
        new: dict[str, Any] = {}
        for key, value in entry.items():
            if key == "id":
                new[key] = value
            elif key == "class":
                new[key] = resolve(value) if isinstance(value, str) else value
            else:
                prop = resolve(key)
                definition = ontology.properties.get(prop)
                if definition is not None and definition.is_object:
                    value = _individuals(ontology, value, namespace)
                new[prop] = value
        out.append(new)
    return {**data, "instances": out}


def _individuals(ontology: Ontology, value: Any, namespace: str) -> Any:
    if isinstance(value, list):
        return [_individuals(ontology, v, namespace) for v in value]
    if isinstance(value, str) and namespace + value in ontology.individuals:
        return namespace + value
    return value
