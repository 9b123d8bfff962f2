"""Hydration beyond the focus: the properties of the instances read from FHIR resources, the
links between them, and inverse properties.

A resource that becomes an instance (a draft order, a stored order, a condition, an encounter)
reads every property its class carries (``horis:domain`` the class or above) from its own
resource, through the mappings of its resource type: ``horis:fhirPath`` is evaluated on that
resource alone (or, with ``horis:via``, on the resources its References name: a contained
Medication, or one the call read), with the mapping's ``horis:where``/``horis:coding``/
``horis:inValueSet`` filters applied to it. An object property whose value is a FHIR
``Reference`` links to the instance of the resource it names, created on first sight with the
most specific class its code maps to in the property's range (else the range class); a reference
to the focus's own resource links to the focus. ``horis:inverseOf`` adds the reverse link of
every link hydration read, so rules about an order can reach its patient.

The instance's class is what ``properties_of`` reads; a resource about someone other than the
focus is not followed (its ``subject`` is checked like every other resource's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.fhir.inputs import label_of
from app.fhir.links import resolve
from app.fhir.reading import as_codings, codings, evaluate, source_of
from app.fhir.unread import code_verdict, record_name
from app.ontology.model import XSD, FhirMapping, PropertyDef
from app.world.facts import Assert, Change, Violation

if TYPE_CHECKING:
    from app.fhir.codes import CodeClassifier
    from app.fhir.hydration import Hydration
    from app.fhir.inputs import InputRecorder

_STRING = XSD + "string"


def _is_concept(value: Any) -> bool:
    """A CodeableConcept or Coding (what a code-classified string property reads)."""
    return isinstance(value, dict) and any(k in value for k in ("coding", "code", "text"))


@dataclass(kw_only=True)
class Instance:
    """A resource that became an instance: its reference, class, and the resource itself (the
    one from the hook context when two resources share a reference)."""

    ref: str
    cls: str
    resource: dict[str, Any]
    from_context: bool = False


class InstanceReading:
    """The part of the hydrator that makes resources instances and reads their own properties
    (a mixin of ``app.fhir.hydrate._Hydrator``, whose attributes and helpers it uses)."""

    if TYPE_CHECKING:
        from app.ontology.model import Ontology

        o: Ontology
        codes: CodeClassifier
        canonical: Callable[[str], str]
        focus_id: str
        focus_class: str
        out: Hydration
        inputs: InputRecorder
        instances: dict[str, Instance]
        _seen: dict[tuple[str, str], dict[str, Any]]

        def _targets(self, m: FhirMapping, r: dict[str, Any]) -> list[Mapping[str, Any]]: ...

        def _linked(
            self,
            m: FhirMapping,
            r: Mapping[str, Any],
            targets: list[Mapping[str, Any]],
            prop: PropertyDef | None = None,
        ) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]: ...

        def _assert_literal(
            self,
            prop: PropertyDef,
            m: FhirMapping,
            r: Mapping[str, Any],
            raw: Any,
            subject: str | None = None,
        ) -> None: ...

        def _about_focus(self, r: Mapping[str, Any], prop: str | None) -> bool: ...

        def _names_someone(self, r: Mapping[str, Any]) -> bool: ...

        def _is_focus_resource(self, r: Mapping[str, Any]) -> bool: ...

    def _coded_tree(self, root: str) -> bool:
        """Whether codes decide membership anywhere in the class tree under ``root``; when none
        do, every resource a mapping selects is a record of the range class."""
        return any(
            (c := self.o.classes.get(iri)) is not None and bool(c.codes or c.value_sets)
            for iri in self.o.subclasses(root)
        )

    def _instance_properties(self) -> None:
        """Every instance reads its class's properties from its own resource; instances that
        links create read theirs too."""
        done: set[str] = set()
        while len(done) < len(self.instances):
            for iid in [i for i in self.instances if i not in done]:
                done.add(iid)
                inst = self.instances[iid]
                rtype = inst.resource.get("resourceType")
                for prop in self.o.properties_of(inst.cls):
                    first = len(self.out.changes)
                    read = False
                    for m in prop.from_fhir:
                        if m.resource_type != rtype or m.context_key is not None:
                            continue
                        read = True
                        self.inputs.read(prop)
                        if prop.is_object:
                            self._instance_link(iid, inst, prop, m)
                        else:
                            self._instance_datum(iid, inst, prop, m)
                    if read and prop.absent_means == "Unread":
                        self._needed(iid, inst, prop, first)

    def _needed(self, iid: str, inst: Instance, prop: PropertyDef, first: int) -> None:
        """A property a record must have (``horis:absentMeans horis:Unread``): a record read
        without a value for it (an order with no supply duration) is unread, not a record
        that says nothing — unless that record is not about the focus at all."""
        if any(
            isinstance(c, Assert) and c.subject == iid and c.property == prop.iri
            for c in self.out.changes[first:]
        ):
            return
        if self._names_someone(inst.resource) and not self._about_focus(inst.resource, None):
            return
        ref = source_of(inst.resource).reference
        self.inputs.unread(prop, ref, None, f"it has no {label_of(prop)}")

    def _instance_datum(self, iid: str, inst: Instance, prop: PropertyDef, m: FhirMapping) -> None:
        r = inst.resource
        found: list[tuple[Mapping[str, Any], Any]] = []
        concepts: list[Any] = []
        for node, origin in self._linked(m, r, self._targets(m, r), prop):
            for v in evaluate(node, m.fhir_path):
                if prop.closed_over and prop.range == _STRING and _is_concept(v):
                    concepts.append(v)
                for item in as_codings(v, self.canonical) if prop.range == _STRING else (v,):
                    if item is not None:
                        found.append((origin, item))
        if concepts:  # a code this property classifies by: read, none of ours, or unread
            verdict, why = code_verdict(self.o, prop, concepts, canonical=self.canonical)
            if verdict == "unread":
                self.inputs.unread(prop, source_of(r).reference, record_name(concepts), why)
        for origin, raw in found[:1] if m.pick == "Latest" else found:
            self._assert_literal(prop, m, origin, raw, subject=iid)

    def _instance_link(self, iid: str, inst: Instance, prop: PropertyDef, m: FhirMapping) -> None:
        r = inst.resource
        tree = set(self.o.subclasses(prop.range))
        for node, _origin in self._linked(m, r, self._targets(m, r)):
            for value in evaluate(node, m.fhir_path):
                found = resolve(r, value, self._seen)
                if found is None:
                    continue
                target = found[0]
                if self._is_focus_resource(target):
                    if not self.o.is_subclass(self.focus_class, prop.range):
                        continue
                    other = self.focus_id
                else:
                    if self._names_someone(target) and not self._about_focus(target, prop.iri):
                        continue
                    classes, unsettled = self.codes.classes(
                        codings(target.get("code"), self.canonical),
                        tree,
                        source_of(target).reference,
                    )
                    if not classes and unsettled is not None:
                        # the terminology could not be asked: the link is not "none of ours"
                        self.inputs.unread(
                            prop,
                            source_of(target).reference,
                            record_name([target.get("code")]),
                            unsettled,
                        )
                    cls = max(classes, key=lambda c: len(self.o.ancestors(c)), default=prop.range)
                    other = self._instance_id(dict(target), cls)
                self.out.changes.append(Assert(iid, prop.iri, other, source_of(r)))

    def _inverses(self) -> None:
        """(o, Q, s) for every (s, P, o) read, where Q is declared ``horis:inverseOf`` P."""
        inverse: dict[str, list[str]] = {}
        for prop in self.o.properties.values():
            for p in prop.inverse_of:
                inverse.setdefault(p, []).append(prop.iri)
        if not inverse:
            return
        known = {self.focus_id, *self.instances}
        added: list[Change] = []
        for ch in self.out.changes:
            if isinstance(ch, Assert) and ch.property in inverse and ch.value in known:
                for q in inverse[ch.property]:
                    added.append(Assert(str(ch.value), q, ch.subject, ch.source))
        self.out.changes.extend(added)

    def _instance_id(self, r: Mapping[str, Any], cls: str, *, from_context: bool = False) -> str:
        """The instance a resource is, created on first sight. Two different resources named
        by one ``Type/id`` are one instance: the one from the hook context is read (it is what
        the clinician acts on), else the first one read, and the clash is recorded. Two draft
        orders of the hook context that share an id are two orders the clinician is signing:
        each is its own instance (the second named ``Type/id#2``), never merged, and the clash
        is recorded."""
        src = source_of(r)
        ref = src.reference
        for iid, inst in self.instances.items():
            if inst.ref != ref:
                continue
            if inst.resource != r and from_context and inst.from_context:
                continue  # another draft under the same id: an instance of its own, below
            if inst.resource != r:
                if from_context and not inst.from_context:
                    inst.resource, inst.cls, inst.from_context = dict(r), cls, True
                kept = "the one in the hook context" if inst.from_context else "the first"
                self.out.violations.append(
                    Violation(
                        "duplicate-instance",
                        iid,
                        None,
                        ref,
                        f"two different resources are named {ref}; {kept} is read",
                    )
                )
            return iid
        iid = src.id if src.id not in self.instances and src.id != self.focus_id else ref
        clash = any(inst.ref == ref for inst in self.instances.values())
        if iid in self.instances:
            n = 2
            while f"{ref}#{n}" in self.instances:
                n += 1
            iid = f"{ref}#{n}"
        if clash:  # a second draft order under one id
            self.out.violations.append(
                Violation(
                    "duplicate-instance",
                    iid,
                    None,
                    ref,
                    f"two draft orders are named {ref}; both are read, the second as {iid}",
                )
            )
        self.instances[iid] = Instance(
            ref=ref, cls=cls, resource=dict(r), from_context=from_context
        )
        return iid
