"""Object properties read from FHIR: each record the property's mappings select becomes an
instance of the most specific class its codes map to, linked from the focus, or is recorded as
unread or none of ours (``app.fhir.unread``).

A mixin of ``app.fhir.hydrate._Hydrator``, whose attributes and helpers it uses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from app.fhir.inputs import is_stale
from app.fhir.reading import codings, evaluate, source_of
from app.fhir.records import is_record
from app.fhir.times import UNDATED, effective, when_key
from app.fhir.unread import Verdict, code_verdict, filter_gap, outside_scope, record_name
from app.ontology.model import FhirMapping, PropertyDef
from app.world.facts import Assert

if TYPE_CHECKING:
    from app.fhir.codes import CodeClassifier
    from app.fhir.hydration import Hydration
    from app.fhir.inputs import InputRecorder
    from app.ontology.model import Ontology


class ObjectReading:
    """The part of the hydrator that reads object properties of the focus."""

    if TYPE_CHECKING:
        o: Ontology
        codes: CodeClassifier
        canonical: Callable[[str], str]
        focus_id: str
        out: Hydration
        inputs: InputRecorder
        _at: datetime
        _text_types: frozenset[str]

        def _candidates(self, m: FhirMapping) -> list[dict[str, Any]]: ...

        def _targets(self, m: FhirMapping, r: dict[str, Any]) -> list[Mapping[str, Any]]: ...

        def _linked(
            self,
            m: FhirMapping,
            r: Mapping[str, Any],
            targets: list[Mapping[str, Any]],
            prop: PropertyDef | None = None,
        ) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]: ...

        def _about_focus(self, r: Mapping[str, Any], prop: str | None) -> bool: ...

        def _is_about_focus_quietly(self, r: Mapping[str, Any]) -> bool: ...

        def _coded_tree(self, root: str) -> bool: ...

        def _instance_id(
            self, r: Mapping[str, Any], cls: str, *, from_context: bool = False
        ) -> str: ...

    def _object(self, prop: PropertyDef) -> None:
        """Every record the property's mappings select, read through all of them: a coded
        record becomes an instance of the most specific class its codes map to; one none of its
        codes classifies is unread, or none of ours where the property is closed over a system
        it is coded in (``app.fhir.unread``)."""
        tree = set(self.o.subclasses(prop.range))
        coded = self._coded_tree(prop.range)
        listed = self._listed(tree) if coded else frozenset()
        old: list[tuple[datetime, Mapping[str, Any], FhirMapping]] = []
        records: dict[int, tuple[dict[str, Any], FhirMapping, list[Any]]] = {}
        gaps: dict[int, tuple[dict[str, Any], str]] = {}
        first = len(self.out.changes)
        for m in prop.from_fhir:
            for r in self._candidates(m):
                targets = self._targets(m, r)
                if not targets:
                    if is_record(r) and self._is_about_focus_quietly(r):
                        gap = filter_gap(m, r) if m.where is not None else None
                        if gap is not None:
                            gaps.setdefault(id(r), (r, gap))
                    continue
                when = when_key(effective(r))
                if is_stale(when, self._at, m.max_age):
                    old.append((when, r, m))
                    continue
                concepts = [
                    concept
                    for node, _origin in self._linked(m, r, targets, prop)
                    for concept in evaluate(node, m.fhir_path)
                ]
                if not concepts and m.fhir_path.split(".", 1)[0] in m.missing_excludes:
                    continue  # the element is optional here: a record without it says nothing
                _r, _m, seen = records.setdefault(id(r), (r, m, []))
                seen.extend(concepts)
        for r, m, concepts in records.values():
            gaps.pop(id(r), None)
            self._object_record(prop, m, r, concepts, tree, coded, listed)
        for r, gap in gaps.values():
            concepts = [  # what every mapping reads of it: its code, a reaction's substance…
                c
                for each in prop.from_fhir
                if each.resource_type == r.get("resourceType") and each.via is None
                for c in evaluate(r, each.fhir_path)
            ]
            if coded and self._verdict(prop, concepts, listed)[0] == "not-ours":
                continue
            if self._about_focus(r, prop.iri):
                self.inputs.unread(prop, source_of(r).reference, record_name(concepts), gap)
        if old and len(self.out.changes) == first:  # records there were, all too old
            when, res, m = max(old, key=lambda item: item[0])
            taken = None if when == UNDATED else when
            self.inputs.stale(prop, m, source_of(res).reference, taken)

    def _verdict(
        self, prop: PropertyDef, concepts: list[Any], listed: frozenset[str]
    ) -> tuple[Verdict, str]:
        return code_verdict(self.o, prop, concepts, listed=listed, canonical=self.canonical)

    def _listed(self, tree: set[str]) -> frozenset[str]:
        """The codes that classify a record into a class of ``tree``."""
        out: set[str] = set()
        for iri in tree:
            c = self.o.classes.get(iri)
            if c is None:
                continue
            out.update(c.codes)
            for vs in c.value_sets:
                d = self.o.value_sets.get(vs)
                if d is not None:
                    out.update(d.codes)
        return frozenset(out)

    def _object_record(
        self,
        prop: PropertyDef,
        m: FhirMapping,
        r: dict[str, Any],
        concepts: list[Any],
        tree: set[str],
        coded: bool,
        listed: frozenset[str],
    ) -> None:
        classes, unsettled = self.codes.classes(
            (coding for concept in concepts for coding in codings(concept, self.canonical)),
            tree,
            source_of(r).reference,
        )
        acted_on = m.context_key is not None
        if classes:
            # the most specific class among the codes (deepest in the tree)
            cls = max(classes, key=lambda c: len(self.o.ancestors(c)))
        elif not coded:
            cls = prop.range  # a record of a class no code decides
        else:
            verdict, why = self._verdict(prop, concepts, listed)
            if unsettled is not None:  # the terminology could not say: unread, never "not ours"
                verdict, why = "unread", unsettled
            text_only = not any(codings(c, self.canonical) for c in concepts)
            if verdict == "unread" and text_only and r.get("resourceType") in self._text_types:
                return  # its text is the run's free text, read by the PerceptionStep
            if verdict == "unread" and self._about_focus(r, prop.iri):
                name = record_name(concepts)
                self.inputs.unread(prop, source_of(r).reference, name, why)
            if not acted_on:
                return  # none of ours, or unread: not a fact of the range tree
            if verdict == "not-ours" and outside_scope(self.o, prop, concepts, self.canonical):
                return  # outside the service's scope: nothing it checks or acts on
            cls = prop.range  # acted on: an instance, whatever is known of it
        if not self._about_focus(r, prop.iri):
            return
        src = source_of(r)
        instance_id = self._instance_id(r, cls, from_context=acted_on)
        self.out.changes.append(Assert(self.focus_id, prop.iri, instance_id, src))
