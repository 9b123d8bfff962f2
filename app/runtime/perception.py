"""A PerceptionStep's output → World changes (provenance ``perception``).

The output follows the schema derived from ``horis:extracts``: one key per extracted class (its
local name), holding an object or a list of objects, each with property values by local name;
a ``"class"``/``"type"`` key picks a class from the closed subclass tree; a bare string names a
class of the tree (``"Symptom": ["ChestPain"]``). The structured-input form (docs/schema.md)
``{"instances": [...]}`` is accepted too. Decisions made here:

- an object of the workflow's focus class describes the focus instance (it exists already
  when structured input created it) — text adds facts to the patient, not a second patient;
- an object-property value that names a class of the range's tree creates a new instance of
  that class (``"hasSymptom": ["ChestPain"]``);
- an instance of a non-focus class is linked to the focus through the focus class's first
  property whose range admits it;
- names nothing in the ontology knows still become changes (IRIs in the deployment
  namespace), so the World's gate rejects them and the rejection is fed back to the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.ontology.model import Ontology, Value
from app.runtime.names import iri_for, is_subclass
from app.world.facts import AddInstance, Assert, Change


class _Builder:
    def __init__(
        self,
        ontology: Ontology,
        focus: str | None,
        focus_class: str | None,
        prefix: str,
        namespace: str | None,
    ) -> None:
        self.o = ontology
        self.ns = namespace
        self.focus = focus
        self.focus_class = focus_class
        self.prefix = prefix
        self.changes: list[Change] = []
        self.created: set[str] = set()
        self.n = 0

    def iri(self, name: str) -> str:
        return iri_for(self.o, name, self.ns)

    def new_id(self, cls: str) -> str:
        self.n += 1
        return f"{self.prefix}-{self.o.classes[cls].name if cls in self.o.classes else 'x'}{self.n}"

    def is_focus_class(self, cls: str) -> bool:
        fc = self.focus_class
        return fc is not None and (is_subclass(self.o, cls, fc) or is_subclass(self.o, fc, cls))

    def record(self, cls: str, item: Any, *, link: bool) -> str:
        if isinstance(item, str):
            ident = self.new_instance(self.iri(item))
        elif isinstance(item, Mapping):
            explicit = item.get("class", item.get("type"))
            target = self.iri(str(explicit)) if explicit is not None else cls
            ident_value = item.get("id")
            if ident_value is not None:
                ident = str(ident_value)
                if ident != self.focus and ident not in self.created:
                    self.changes.append(AddInstance(ident, target))
                    self.created.add(ident)
            elif self.focus is not None and self.is_focus_class(target):
                ident = self.focus
            else:
                ident = self.new_instance(target)
                if self.focus is None and self.is_focus_class(target):
                    self.focus = ident  # text alone introduced the run's subject
            for key, raw in item.items():
                if key in ("id", "class", "type"):
                    continue
                self.assert_values(ident, self.iri(key), raw)
        else:
            ident = self.new_instance(cls)
        if link and ident != self.focus:
            self.link(ident)
        return ident

    def new_instance(self, cls: str) -> str:
        ident = self.new_id(cls)
        self.changes.append(AddInstance(ident, cls))
        self.created.add(ident)
        return ident

    def link(self, ident: str) -> None:
        if self.focus is None or self.focus_class is None:
            return
        cls = next(
            (c.class_iri for c in self.changes if isinstance(c, AddInstance) and c.id == ident),
            None,
        )
        if cls is None:
            return
        for prop in self.o.properties.values():
            if (
                prop.is_object
                and is_subclass(self.o, self.focus_class, prop.domain)
                and is_subclass(self.o, cls, prop.range)
            ):
                self.changes.append(Assert(self.focus, prop.iri, ident))
                return

    def assert_values(self, subject: str, prop: str, raw: Any) -> None:
        values = raw if isinstance(raw, list) else [raw]
        definition = self.o.properties.get(prop)
        for value in values:
            if value is None:
                continue
            if definition is not None and definition.is_object:
                if isinstance(value, Mapping):
                    target: Value = self.record(definition.range, value, link=False)
                else:
                    target = self.object_value(str(value), definition.range)
                self.changes.append(Assert(subject, prop, target))
            else:
                self.changes.append(Assert(subject, prop, value))

    def object_value(self, name: str, range_class: str) -> Value:
        if name in self.created or name == self.focus:
            return name
        iri = self.iri(name)
        if iri in self.o.individuals:
            return iri
        if iri in self.o.classes and is_subclass(self.o, iri, range_class):
            return self.new_instance(iri)
        return name  # an unknown instance id: the gate decides


def extraction_changes(
    ontology: Ontology,
    output: Mapping[str, Any],
    *,
    focus: str | None,
    focus_class: str | None,
    id_prefix: str,
    namespace: str | None = None,
) -> list[Change]:
    """The changes a Bridge extraction proposes (nothing is applied here); local names resolve
    in ``namespace`` first (the running workflow's)."""
    b = _Builder(ontology, focus, focus_class, id_prefix, namespace)
    if isinstance(output.get("instances"), list):
        return _instances(b, [i for i in output["instances"] if isinstance(i, Mapping)])
    # The focus class first, so that other instances can link to the focus it may create.
    ordered = sorted(output.items(), key=lambda kv: not b.is_focus_class(b.iri(kv[0])))
    for key, raw in ordered:
        cls = b.iri(key)
        for item in raw if isinstance(raw, list) else [raw]:
            b.record(cls, item, link=True)
    return b.changes


def _instances(b: _Builder, items: list[Mapping[str, Any]]) -> list[Change]:
    """The derived schema's form: ids are the model's own, mapped onto the World's (the focus
    keeps its id; every other instance gets a run-scoped one so it cannot collide)."""
    ids: dict[str, str] = {}
    classes: dict[str, str] = {}
    for item in items:
        out_id = str(item.get("id", ""))
        cls = b.iri(str(item.get("class", "")))
        if b.is_focus_class(cls) and (
            b.focus is None or out_id == b.focus or b.focus not in ids.values()
        ):
            if b.focus is None:
                b.focus = f"{b.prefix}-{out_id}"
                b.changes.append(AddInstance(b.focus, cls))
                b.created.add(b.focus)
            ids[out_id] = b.focus
        else:
            ids[out_id] = f"{b.prefix}-{out_id}"
            b.changes.append(AddInstance(ids[out_id], cls))
            b.created.add(ids[out_id])
        classes[ids[out_id]] = cls
    linked: set[str] = set()
    for item in items:
        subject = ids[str(item.get("id", ""))]
        for key, raw in item.items():
            if key in ("id", "class"):
                continue
            prop = b.iri(key)
            definition = b.o.properties.get(prop)
            for value in raw if isinstance(raw, list) else [raw]:
                if value is None:
                    continue
                if definition is not None and definition.is_object and isinstance(value, str):
                    target: Value = (
                        ids[value] if value in ids else b.object_value(value, definition.range)
                    )
                    linked.add(str(target))
                    b.changes.append(Assert(subject, prop, target))
                else:
                    b.changes.append(Assert(subject, prop, value))
    for ident in classes:
        if ident != b.focus and ident not in linked:
            b.link(ident)
    return b.changes
