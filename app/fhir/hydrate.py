"""FHIR resources → World changes, driven only by the ontology's ``horis:fromFhir`` mappings.

For every property of the focus class that has mappings, the resources of the mapping's type
(from prefetch, or from the hook context key it names, e.g. ``draftOrders``) are filtered by
code (an Observation also matches through a component with that code, as a panel carries
its parts) and by the ``horis:where`` FHIRPath, the ``horis:fhirPath``
is evaluated, and ``Latest`` (by effective time) or ``All`` values are kept:

- Whatever the mapping says, a record that is no usable result (an Observation not ``final``,
  ``amended``, ``corrected`` or ``preliminary``; anything ``entered-in-error``; a
  ``dataAbsentReason``) is not read, and a resource about anyone but the focus (its
  ``subject``/``patient`` reference) is not read and is recorded as a ``subject`` violation.
- Quantities are converted with UCUM to the property's unit, from the ``code`` of a UCUM (or
  system-less) Quantity only; an annotated target unit needs the same annotation in the source.
  A unit that is not UCUM or cannot be converted yields a ``unit`` violation and no fact (never
  a silent misread; an older reading is not used in its place).
- ``horis:transform horis:YearsSince`` turns a date into whole years at the hook's time,
  counting a partial date from the latest day it can mean (never an overstated age).
- CodeableConcepts of object properties map to classes (``horis:code``, through the range's
  subclass tree) and become instances linked from the focus; each instance is the resource
  it came from. A resource the clinician is acting on (from the hook context) becomes an
  instance of the range class even when its code maps to no subclass; a resource from prefetch
  whose code maps to nothing in the range tree is not a fact.

Instances then read their own properties from their own resources, follow references
(``horis:via``, links between instances) and get their ``horis:inverseOf`` links
(``app.fhir.instances``).

This module selects what each mapping reads and checks whom it is about; literal values are read
in ``app.fhir.literals``, coded resources become instances in ``app.fhir.objects``.

Every change carries its ``Source`` (type, id, ``meta.versionId``, ``meta.lastUpdated``); the
source-version vector lists every resource the call read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from app.data_notes import DataNote, Unreadable
from app.digest import json_digest
from app.fhir.codes import CodeClassifier
from app.fhir.hydration import Hydration, SourceVersion
from app.fhir.inputs import InputRecorder
from app.fhir.instances import Instance, InstanceReading
from app.fhir.links import resolve
from app.fhir.literals import LiteralReading
from app.fhir.objects import ObjectReading
from app.fhir.outcomes import server_errors
from app.fhir.reading import codings as _codings
from app.fhir.reading import evaluate, source_of, sources_once
from app.fhir.records import ABSENT, FOCUS_TYPE, about, components, is_bare, is_record, refers_to
from app.fhir.systems import canonical_systems
from app.fhir.times import effective, when_key
from app.fhir.values import values_in_components
from app.fhir_json import full_urls, resources_of
from app.ontology.model import (
    DEFAULT_CLOCK_SKEW,
    FhirMapping,
    Ontology,
    PrefetchTemplate,
    PropertyDef,
    TextSource,
)
from app.terminology import Terminology
from app.terminology.port import TerminologyPort
from app.world.facts import AddInstance, Assert, Violation


def _digest(resource: Mapping[str, Any]) -> str:
    return json_digest(resource)


class _Hydrator(LiteralReading, ObjectReading, InstanceReading):
    def __init__(
        self,
        ontology: Ontology,
        *,
        focus_id: str,
        focus_class: str,
        data: Mapping[str, Any],
        context: Mapping[str, Any],
        now: datetime,
        prefetch: Sequence[PrefetchTemplate] | None = None,
        truncated: Mapping[str, str] | None = None,
        invalid: Mapping[str, Sequence[Unreadable]] | None = None,
        clock_skew: float = DEFAULT_CLOCK_SKEW,
        terminology: Terminology | None = None,
        port: TerminologyPort | None = None,
        port_until: float | None = None,
    ) -> None:
        self.o = ontology
        #: a code system as the deployment writes it, whatever the EHR sent (an OID, an older URI)
        self.canonical = canonical_systems(terminology)
        self.focus_id = focus_id
        self.focus_class = focus_class
        #: the properties hydration reads on the focus (asked once: the ontology does not keep it)
        self._focus_properties = ontology.properties_of(focus_class)
        self.context = context
        self.now = now
        self._at = now if now.tzinfo is not None else now.replace(tzinfo=UTC)
        self.out = Hydration()
        #: classes of codes: lists, earlier expansions, concept maps, then the port
        self.codes = CodeClassifier(o=ontology, port=port, until=port_until, notes=self.out.notes)
        errors, warnings = server_errors(data)
        self.out.notes.extend(warnings)
        for key, bad in (invalid or {}).items():
            self.out.notes.extend(
                DataNote(
                    rule="invalid-resource",
                    field=f"prefetch.{key}",
                    received=u.reference,
                    read_as="not read",
                    message=f"{u.reference} in {key!r} is not valid FHIR R4 ({u.why}): not read",
                )
                for u in bad
            )
        self.inputs = InputRecorder(
            self.out.inputs,
            data=data,
            context=context,
            prefetch=prefetch,
            truncated=truncated or {},
            errors=errors,
            invalid=invalid,
            read_types=frozenset(
                m.resource_type
                for p in self._focus_properties
                for m in p.from_fhir
                if m.context_key is None
            ),
        )
        #: readings stamped later than this are refused as taken in the future
        self._latest = self._at + timedelta(seconds=clock_skew)
        #: resource types whose free text a PerceptionStep reads (set by ``run``)
        self._text_types: frozenset[str] = frozenset()
        self.pool: list[dict[str, Any]] = []
        self._seen: dict[tuple[str, str], dict[str, Any]] = {}
        for value in data.values():
            for r in resources_of(value):
                self._remember(r)
        self.instances: dict[str, Instance] = {}
        self._about_focus_of: dict[tuple[str, str], bool] = {}
        self._from_context = {id(r) for v in context.values() for r in resources_of(v)}
        #: what a reference may name besides the resources read: a Bundle entry by its
        #: ``fullUrl`` (``urn:uuid:…``), and a resource the hook context carries beside the
        #: orders (the Medication a draft order's ``medicationReference`` names)
        self._by_url = full_urls([*data.values(), *context.values()])
        self._in_context = {
            (str(r.get("resourceType")), str(r.get("id"))): r
            for v in context.values()
            for r in resources_of(v)
        }
        #: the EHR's records by type, for the prefetch mappings (the pool only grows by what the
        #: hook context carries, which they never read): one pass over the data, not one per
        #: mapping
        self._records_of: dict[str, list[dict[str, Any]]] = {}
        for r in self.pool:
            if id(r) not in self._from_context:
                self._records_of.setdefault(str(r.get("resourceType")), []).append(r)
        #: per call, memoised: a concept's codings (by the concept's identity: every concept
        #: read lives in the data for the whole call)
        self._codings_of: dict[int, list[str]] = {}
        self._systems_in: dict[int, frozenset[str]] = {}
        #: per resource read, memoised for every property that looks at it: whether it is a
        #: record (its status), whether it is about the focus, and when it was taken
        self._record_of: dict[int, tuple[bool, bool, datetime]] = {}
        #: (mapping, concept) pairs, by identity, whose code the mapping does not name: each
        #: pair is asked by the selection, the unusable check and the unread check of a record
        #: (the call's data and the ontology outlive the hydration: identities are not reused)
        self._not_coded: set[tuple[int, int]] = set()
        #: each record's codings (its code's and its components' codes), by identity
        self._signatures: dict[int, tuple[str, ...]] = {}
        #: (property, mapping, codings) → whether a record with those codings is another
        #: reading's for the mapping (``_passed_over``)
        self._passed: dict[tuple[int, int, tuple[str, ...]], bool] = {}
        #: the EHR's records of each type grouped by their codings (``_selectable``), with
        #: their place in the data
        self._by_signature: dict[
            str, list[tuple[tuple[str, ...], list[tuple[int, dict[str, Any]]]]]
        ] = {}

    def _remember(self, resource: dict[str, Any]) -> None:
        key = (str(resource.get("resourceType")), str(resource.get("id")))
        if key in self._seen:
            return
        self._seen[key] = resource
        self.pool.append(resource)
        self.out.sources.append(
            SourceVersion(source=source_of(resource), content_hash=_digest(resource))
        )

    def _candidates(self, m: FhirMapping) -> list[dict[str, Any]]:
        if m.context_key is not None:
            found = resources_of(self.context.get(m.context_key))
            for r in found:
                if r.get("resourceType") == m.resource_type:
                    self._remember(r)
        else:
            # a prefetch mapping reads the EHR's records, never what the hook context carries
            # (the orders being signed are not yet stored orders)
            return list(self._records_of.get(m.resource_type, ()))
        return [r for r in found if r.get("resourceType") == m.resource_type]

    def _coded(self, m: FhirMapping, concept: Any, record: Mapping[str, Any] | None = None) -> bool:
        """Whether a code matches the mapping: one of its ``horis:coding`` values, or a member
        of one of its ``horis:inValueSet`` value sets (``record``: the record selected, named
        in a note when only an earlier expansion lists the code)."""
        key = (id(m), id(concept))
        if key in self._not_coded:
            return False
        codes = self._concept_codings(concept)
        if not self.o.mapping_codes(m).codes.isdisjoint(codes) or self._coded_earlier(
            m, codes, record
        ):
            return True
        self._not_coded.add(key)  # a False has no side effect: remembered
        return False

    def _coded_earlier(
        self, m: FhirMapping, codes: Iterable[str], record: Mapping[str, Any] | None
    ) -> bool:
        """``_coded`` through an earlier expansion of one of the mapping's value sets, asked of
        codes none of whose current expansions lists (``record``: the record selected, named
        in the note the run carries)."""
        if not m.value_sets:
            return False
        for c in codes:
            for vs in m.value_sets:
                if self.o.in_value_set(c, vs, earlier=True):
                    if record is not None:  # a record selected: the run says why
                        self.codes.note_earlier(c, vs, source_of(record).reference)
                    return True
        return False

    def _signature(self, r: Mapping[str, Any]) -> tuple[str, ...]:
        """Every coding of a record's code and of its components' codes, once per record."""
        found = self._signatures.get(id(r))
        if found is None:
            nodes = [r.get("code"), *(c.get("code") for c in components(r))]
            found = tuple(c for n in nodes if n is not None for c in self._concept_codings(n))
            self._signatures[id(r)] = found
        return found

    def _selectable(self, prop: PropertyDef, m: FhirMapping) -> list[dict[str, Any]]:
        """The candidates of ``m`` (which names codes) that are not another reading's records
        (``_passed_over``), in the data's order. A prefetch mapping's candidates are taken by
        their set of codings, decided once per set: the records of a search are visited once
        per call, not once per mapping of their type."""
        if m.context_key is not None:
            return [r for r in self._candidates(m) if not self._passed_over(prop, m, r)]
        groups = self._by_signature.get(m.resource_type)
        if groups is None:
            grouped: dict[tuple[str, ...], list[tuple[int, dict[str, Any]]]] = {}
            for i, r in enumerate(self._records_of.get(m.resource_type, ())):
                grouped.setdefault(self._signature(r), []).append((i, r))
            groups = self._by_signature[m.resource_type] = list(grouped.items())
        kept = [
            member
            for sig, members in groups
            if not self._passed_sig(prop, m, sig)
            for member in members
        ]
        if len(groups) > 1:
            kept.sort(key=lambda member: member[0])
        return [r for _i, r in kept]

    def _passed_over(self, prop: PropertyDef, m: FhirMapping, r: Mapping[str, Any]) -> bool:
        """Whether ``r`` is another reading's record for ``m`` (which names codes): none of its
        codings is one ``m`` names, and one is in a system ``prop``'s list is complete in. Such
        a record is neither selected nor unread: it is skipped (the unread check says the same
        of it)."""
        return self._passed_sig(prop, m, self._signature(r))

    def _passed_sig(self, prop: PropertyDef, m: FhirMapping, sig: tuple[str, ...]) -> bool:
        """``_passed_over`` of the records whose codings are ``sig``, decided once per mapping
        and set of codings rather than once per record."""
        key = (id(prop), id(m), sig)
        found = self._passed.get(key)
        if found is None:
            recognised = self.o.mapping_codes(m)
            named = [c for c in sig if c.split("|", 1)[0] in recognised.systems]
            found = (
                any(c.split("|", 1)[0] in prop.closed_over for c in named)
                and recognised.codes.isdisjoint(sig)
                and not self._coded_earlier(m, sig, None)
            )
            self._passed[key] = found
        return found

    def _record_facts(self, r: Mapping[str, Any]) -> tuple[bool, bool, datetime]:
        """(is a record, is about the focus, when it was taken), once per resource."""
        found = self._record_of.get(id(r))
        if found is None:
            found = (is_record(r), self._is_about_focus_quietly(r), when_key(effective(r)))
            self._record_of[id(r)] = found
        return found

    def _concept_codings(self, concept: Any) -> list[str]:
        """``_codings(concept)``, once per concept of the call's data."""
        if not isinstance(concept, dict):
            return _codings(concept, self.canonical)
        found = self._codings_of.get(id(concept))
        if found is None:
            found = self._codings_of[id(concept)] = _codings(concept, self.canonical)
        return found

    def _record_systems(self, r: Mapping[str, Any], concepts: list[Any]) -> frozenset[str]:
        """The code systems of a record's ``concepts`` (its code and its components' codes),
        once per record: every reading's mapping asks whether it names one of them."""
        found = self._systems_in.get(id(r))
        if found is None:
            found = frozenset(
                c.split("|", 1)[0] for concept in concepts for c in self._concept_codings(concept)
            )
            self._systems_in[id(r)] = found
        return found

    def _systems(self, m: FhirMapping) -> frozenset[str]:
        """The code systems a mapping's codings and value sets are written in (indexed with the
        ontology)."""
        return self.o.mapping_codes(m).systems

    def _targets(self, m: FhirMapping, r: dict[str, Any]) -> list[Mapping[str, Any]]:
        if not self._record_facts(r)[0] or (m.where is not None and evaluate(r, m.where) != [True]):
            return []
        coded: list[Mapping[str, Any]] = [
            comp
            for comp in r.get("component") or []
            if isinstance(comp, dict) and ABSENT not in comp and self._coded(m, comp.get("code"), r)
        ]
        if not (m.codings or m.value_sets) or self._coded(m, r.get("code"), r):
            if ABSENT in r:
                return []
            # a result whose value sits in its components (one per equation, method or
            # part): those the mapping names are its readings
            return coded if coded and values_in_components(r, m.fhir_path) else [r]
        return coded

    def _linked(
        self,
        m: FhirMapping,
        r: Mapping[str, Any],
        targets: list[Mapping[str, Any]],
        prop: PropertyDef | None = None,
    ) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
        """(node to evaluate ``horis:fhirPath`` on, resource the value is sourced from): the
        targets themselves, or with ``horis:via`` the resources their References name. A
        Reference to a resource the call did not read is an *absent* input of ``prop``."""
        if m.via is None:
            return [(t, r) for t in targets]
        out: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = []
        for t in targets:
            for value in evaluate(t, m.via):
                found = resolve(r, value, self._seen, self._by_url) or resolve(
                    r, value, self._in_context
                )
                if found is not None:
                    if found[1] is not r:  # a resource read by reference is a source too
                        self._remember(dict(found[1]))
                    out.append(found)
                elif prop is not None and isinstance(value, dict) and value.get("reference"):
                    self.inputs.unresolved(prop, source_of(r).reference, str(value["reference"]))
        return out

    def _names_someone(self, r: Mapping[str, Any]) -> bool:
        return about(r) is not None

    def _is_focus_resource(self, r: Mapping[str, Any]) -> bool:
        return (r.get("resourceType"), r.get("id")) == (FOCUS_TYPE, self.focus_id)

    def _about_focus(self, r: Mapping[str, Any], prop: str | None) -> bool:
        """Whether ``r`` is about the focus. One that is not (or names no one) would have become
        a fact: it is recorded, once, as a ``subject`` violation, and read no further."""
        key = (str(r.get("resourceType")), str(r.get("id")))
        known = self._about_focus_of.get(key)
        if known is None:
            known = self._check_subject(r, prop)
            self._about_focus_of[key] = known
        if not known and prop is not None and prop in self.o.properties:
            whom = about(r)
            why = f"it is about {whom}, not this patient" if whom else "it names no patient"
            self.inputs.refused(self.o.properties[prop], source_of(r).reference, why)
        return known

    def _is_user(self, r: Mapping[str, Any]) -> bool:
        """Whether ``r`` is the hook's user (``context.userId``): about no patient, and read for
        the call it acts in (a plan's condition on ``%practitioner``)."""
        return self.context.get("userId") == f"{r.get('resourceType')}/{r.get('id')}"

    def _check_subject(self, r: Mapping[str, Any], prop: str | None) -> bool:
        focus = f"{FOCUS_TYPE}/{self.focus_id}"
        whom = about(r)
        if whom is None and self._is_user(r):
            return True
        ok = whom is not None and refers_to(whom, focus)
        if not ok and whom is not None and whom in self._by_url:
            target = self._by_url[whom]  # a Bundle entry's fullUrl, as transactions write them
            ok = (target.get("resourceType"), target.get("id")) == (FOCUS_TYPE, self.focus_id)
        if not ok and whom is not None and is_bare(whom):
            ok = self._bare_subject(r, whom)
        if not ok:
            said = f"is about {whom}" if whom is not None else "names no subject"
            message = f"{source_of(r).reference} {said}, not {focus}: not read"
            self.out.violations.append(Violation("subject", self.focus_id, prop, whom, message))
        return ok

    def _bare_subject(self, r: Mapping[str, Any], whom: str) -> bool:
        """A subject reference without a resource type (``p1`` for ``Patient/p1``) is read as the
        focus when it is the focus's id, or when ``r`` is a resource of the hook context (a
        draft order of this call is, by the hook's definition, the call's patient's); noted."""
        ref = source_of(r).reference
        focus = f"{FOCUS_TYPE}/{self.focus_id}"
        if whom == self.focus_id:
            rule, why = "bare-subject", "names the patient without its resource type"
        elif id(r) in self._from_context:
            rule = "draft-subject"
            why = "is no reference to a patient, and an order in the hook's context is the call's"
        else:
            return False
        self.out.notes.append(
            DataNote(
                rule=rule,
                field=f"{ref} subject",
                received=whom,
                read_as=focus,
                message=f"{ref}: subject.reference {whom!r} {why}, read as {focus}",
            )
        )
        return True

    def _is_about_focus_quietly(self, r: Mapping[str, Any]) -> bool:
        whom = about(r)
        focus = f"{FOCUS_TYPE}/{self.focus_id}"
        if whom is None:
            return self._is_user(r)
        return refers_to(whom, focus) or whom == self.focus_id

    def run(self, texts: Iterable[TextSource]) -> Hydration:
        texts = tuple(texts)
        self._text_types = frozenset(t.resource_type for t in texts)
        focus_source = self._seen.get(("Patient", self.focus_id))
        for prop in self._focus_properties:
            if not prop.from_fhir:
                continue
            self.inputs.read(prop)
            first = len(self.out.changes)
            if prop.is_object:
                self._object(prop)
            else:
                for m in prop.from_fhir:
                    self._datum(prop, m)
            read = any(
                isinstance(c, Assert) and c.property == prop.iri for c in self.out.changes[first:]
            )
            self.inputs.settle(prop, has_value=read)
        self._instance_properties()
        self._inverses()
        self.out.changes[:0] = [
            AddInstance(
                self.focus_id,
                self.focus_class,
                source_of(focus_source) if focus_source else None,
            ),
            *(
                AddInstance(iid, inst.cls, source_of(inst.resource))
                for iid, inst in self.instances.items()
            ),
        ]
        pieces: list[str] = []
        for t in texts:
            for r in self.pool:
                if r.get("resourceType") != t.resource_type or not is_record(r):
                    continue
                said = [
                    str(v) for v in evaluate(r, t.fhir_path) if isinstance(v, str) and v.strip()
                ]
                if said and self._about_focus(r, None):
                    pieces.extend(said)
        self.out.text = "\n".join(dict.fromkeys(pieces)) or None
        return self.out


def hydrate(
    ontology: Ontology,
    *,
    focus_id: str,
    focus_class: str,
    data: Mapping[str, Any],
    context: Mapping[str, Any],
    now: datetime,
    texts: Iterable[TextSource] = (),
    prefetch: Sequence[PrefetchTemplate] | None = None,
    truncated: Mapping[str, str] | None = None,
    invalid: Mapping[str, Sequence[Unreadable]] | None = None,
    clock_skew: float = DEFAULT_CLOCK_SKEW,
    terminology: Terminology | None = None,
    port: TerminologyPort | None = None,
    port_until: float | None = None,
) -> Hydration:
    """Read ``data`` (prefetch keys → resources) and ``context`` into changes for the focus,
    with the input status of every mapped property. ``prefetch`` (the service's templates)
    says which key feeds which resource type, so a key without data is an *absent* input;
    ``truncated`` names the keys whose search was cut off, and why (``app.fhir.inputs``);
    ``invalid`` the resources of each key that were not valid FHIR and were left out;
    ``terminology`` resolves code-system aliases (the installed one when not given); ``port``
    answers value-set membership the deployment's lists do not settle, asked only before
    ``port_until`` (``time.monotonic()``, the hook's deadline; ``app.fhir.codes``)."""
    with sources_once():
        return _Hydrator(
            ontology,
            focus_id=focus_id,
            focus_class=focus_class,
            data=data,
            context=context,
            now=now,
            prefetch=prefetch,
            truncated=truncated,
            invalid=invalid,
            clock_skew=clock_skew,
            terminology=terminology,
            port=port,
            port_until=port_until,
        ).run(texts)
