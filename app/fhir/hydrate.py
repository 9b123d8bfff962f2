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

Every change carries its ``Source`` (type, id, ``meta.versionId``, ``meta.lastUpdated``); the
source-version vector lists every resource the call read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from app.data_notes import DataNote, Unreadable
from app.digest import canonical_digest
from app.fhir.bounds import COMPARATORS, representative, same_answers
from app.fhir.codes import CodeClassifier
from app.fhir.hydration import Hydration, SourceVersion
from app.fhir.inputs import InputRecorder, is_stale, label_of, unit_refusal
from app.fhir.instances import Instance, InstanceReading
from app.fhir.links import calendar_date, period_days, resolve
from app.fhir.outcomes import server_errors
from app.fhir.reading import as_codings as _as_codings
from app.fhir.reading import codings as _codings
from app.fhir.reading import evaluate, source_of
from app.fhir.records import (
    ABSENT,
    FOCUS_TYPE,
    UCUM,
    about,
    absent_reason,
    components,
    earliest,
    is_bare,
    is_record,
    not_ucum,
    record_problem,
    refers_to,
)
from app.fhir.systems import canonical_systems
from app.fhir.times import UNDATED, effective, when_key, years_since
from app.fhir.unread import Verdict, code_verdict, filter_gap, record_name, system_name
from app.fhir.values import NotANumber, other_value
from app.fhir_json import resources_of
from app.ontology.model import (
    DEFAULT_CLOCK_SKEW,
    XSD,
    FhirMapping,
    Ontology,
    PrefetchTemplate,
    PropertyDef,
    TextSource,
)
from app.terminology import Terminology
from app.terminology.port import TerminologyPort
from app.ucum import UnitError, convert
from app.ucum import display as unit_display
from app.world.facts import AddInstance, Assert, Source, Violation, ViolationCode

_DATE = XSD + "date"
_STRING = XSD + "string"


def _digest(resource: Mapping[str, Any]) -> str:
    return canonical_digest(resource)


class _Hydrator(InstanceReading):
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
        #: the EHR's records by type, for the prefetch mappings (the pool only grows by what the
        #: hook context carries, which they never read): one pass over the data, not one per
        #: mapping
        self._records_of: dict[str, list[dict[str, Any]]] = {}
        for r in self.pool:
            if id(r) not in self._from_context:
                self._records_of.setdefault(str(r.get("resourceType")), []).append(r)
        #: per call, memoised: a concept's codings (by the concept's identity: every concept
        #: read lives in the data for the whole call) and the systems a mapping recognises
        self._codings_of: dict[int, list[str]] = {}
        self._systems_of: dict[int, set[str]] = {}
        #: per resource read, memoised for every property that looks at it: whether it is a
        #: record (its status), whether it is about the focus, and when it was taken
        self._record_of: dict[int, tuple[bool, bool, datetime]] = {}

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

    def _coded(self, m: FhirMapping, concept: Any, ref: str | None = None) -> bool:
        """Whether a code matches the mapping: one of its ``horis:coding`` values, or a member
        of one of its ``horis:inValueSet`` value sets."""
        codes = self._concept_codings(concept)
        if set(m.codings).intersection(codes):
            return True
        for c in codes:
            for vs in m.value_sets:
                if self.o.in_value_set(c, vs):
                    return True
                if self.o.in_value_set(c, vs, earlier=True):
                    if ref is not None:  # a record selected: the run says why
                        self.codes.note_earlier(c, vs, ref)
                    return True
        return False

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

    def _systems(self, m: FhirMapping) -> set[str]:
        """The code systems a mapping's codings and value sets are written in, once per call."""
        found = self._systems_of.get(id(m))
        if found is None:
            found = {c.split("|", 1)[0] for c in m.codings} | {
                c.split("|", 1)[0]
                for vs in m.value_sets
                if (d := self.o.value_sets.get(vs)) is not None
                for c in d.codes
            }
            self._systems_of[id(m)] = found
        return found

    def _targets(self, m: FhirMapping, r: dict[str, Any]) -> list[Mapping[str, Any]]:
        if not self._record_facts(r)[0] or (m.where is not None and evaluate(r, m.where) != [True]):
            return []
        ref = source_of(r).reference
        if not (m.codings or m.value_sets) or self._coded(m, r.get("code"), ref):
            return [] if ABSENT in r else [r]
        return [
            comp
            for comp in r.get("component") or []
            if isinstance(comp, dict)
            and ABSENT not in comp
            and self._coded(m, comp.get("code"), ref)
        ]

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
                found = resolve(r, value, self._seen)
                if found is not None:
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

    def _check_subject(self, r: Mapping[str, Any], prop: str | None) -> bool:
        focus = f"{FOCUS_TYPE}/{self.focus_id}"
        whom = about(r)
        ok = whom is not None and refers_to(whom, focus)
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

    def run(self, texts: Iterable[TextSource]) -> Hydration:
        texts = tuple(texts)
        self._text_types = frozenset(t.resource_type for t in texts)
        focus_source = self._seen.get(("Patient", self.focus_id))
        for prop in self.o.properties_of(self.focus_class):
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

    # --- literal-valued properties ---------------------------------------------------------

    def _datum(self, prop: PropertyDef, m: FhirMapping) -> None:
        found: list[tuple[datetime, dict[str, Any], Any]] = []
        unusable: list[tuple[Mapping[str, Any], str]] = []
        for r in self._candidates(m):
            targets = self._targets(m, r)
            if not targets:
                why = self._unusable(m, r)
                if why is not None:
                    unusable.append((r, why))
                else:
                    self._unread_reading(prop, m, r)
                continue
            if not self._about_focus(r, prop.iri):
                continue
            for node, origin in self._linked(m, r, targets, prop):
                values = evaluate(node, m.fhir_path)
                if not values and (other := other_value(node, m.fhir_path)) is not None:
                    values = [other]  # a number written another way: parsed, or refused
                for v in values:
                    for item in _as_codings(v, self.canonical) if prop.range == _STRING else (v,):
                        if item is not None:
                            found.append((when_key(effective(r)), dict(origin), item))
        found = self._not_in_future(prop, found)
        if not found:
            for res, why in unusable:  # only unusable readings: say why none was read
                self.inputs.refused(prop, source_of(res).reference, why)
            return
        if m.max_age is not None:
            fresh = [f for f in found if not is_stale(f[0], self._at, m.max_age)]
            if not fresh:
                when, r, _raw = max(found, key=lambda f: f[0])
                taken = None if when == UNDATED else when
                self.inputs.stale(prop, m, source_of(r).reference, taken)
                return
            found = fresh
        if m.pick == "Latest":
            found.sort(key=lambda item: item[0], reverse=True)
            tied = [f for f in found if f[0] == found[0][0]]
            if len(tied) > 1:
                self._latest_of_tied(prop, m, tied)
                return
            found = found[:1]
        for _when, r, raw in found:
            self._assert_literal(prop, m, r, raw)

    def _not_in_future(
        self, prop: PropertyDef, found: list[tuple[datetime, dict[str, Any], Any]]
    ) -> list[tuple[datetime, dict[str, Any], Any]]:
        """The readings not stamped after the hook's time (beyond the service's clock skew); each
        later one is a refused input, never the "latest"."""
        kept = []
        for f in found:
            if f[0] != UNDATED and earliest(f[1], f[0]) > self._latest:
                when = f[0].isoformat(timespec="minutes")
                why = f"it is dated {when}, after the time of this call"
                self.inputs.refused(prop, source_of(f[1]).reference, why)
            else:
                kept.append(f)
        return kept

    def _latest_of_tied(
        self, prop: PropertyDef, m: FhirMapping, tied: list[tuple[datetime, dict[str, Any], Any]]
    ) -> None:
        """Several readings share the latest time: read as one when every condition on the
        property answers alike for all of them, else the input is *conflicting*."""
        values = [self._literal_value(prop, m, r, raw) for _w, r, raw in tied]
        if any(v is None for v in values):
            return  # one of them could not be read: refused, and no other is used in its place
        read = [v[0] for v in values if v is not None]
        numbers = [
            Decimal(v) for v in read if isinstance(v, int | Decimal) and not isinstance(v, bool)
        ]
        alike = len(set(map(str, read))) == 1 or (
            len(numbers) == len(read) and same_answers(self.o.conditions_on(prop.iri), numbers)
        )
        if alike:
            _when, r, raw = tied[0]
            self._assert_literal(prop, m, r, raw)
            return
        when = tied[0][0]
        shown = " and ".join(
            f"{v[0]}{'' if v[1] is None else ' ' + str(v[1])} ({source_of(r).reference})"
            for v, (_w, r, _raw) in zip(values, tied, strict=True)
            if v is not None
        )
        at = "with no time" if when == UNDATED else f"at {when.isoformat(timespec='minutes')}"
        detail = (
            f"{label_of(prop)[:1].upper()}{label_of(prop)[1:]} readings disagree: {shown}, "
            f"all taken {at}"
        )
        self.inputs.conflicting(prop, source_of(tied[0][1]).reference, detail)

    def _unread_reading(self, prop: PropertyDef, m: FhirMapping, r: Mapping[str, Any]) -> None:
        """A record of the mapping's type that was not selected: unread when it might be this
        reading — coded in no system the mapping names, text only, or kept out only by an
        element its filter needs that it does not have."""
        record, about_focus, when = self._record_facts(r)
        if not record or not about_focus:
            return
        if is_stale(when, self._at, m.max_age):
            return  # too old to be read whatever it is: it cannot change the decision
        if m.codings or m.value_sets:
            nodes = [r.get("code"), *(c.get("code") for c in components(r))]
            concepts = [c for c in nodes if c is not None]
            systems = self._systems(m)
            coded = [c for concept in concepts for c in self._concept_codings(concept)]
            if not any(c.split("|", 1)[0] in systems for c in coded):
                why = (
                    "it has no code" + (", only its text" if record_name(concepts) else "")
                    if not coded
                    else "it is not coded in a system this reading is recognised by"
                )
                self.inputs.unread(prop, source_of(r).reference, record_name(concepts), why)
                return
            if not self._coded(m, r.get("code")) and not any(
                self._coded(m, c.get("code")) for c in components(r)
            ):
                named = [c for c in coded if c.split("|", 1)[0] in systems]
                if any(c.split("|", 1)[0] in prop.closed_over for c in named):
                    return  # another reading of a system the property's list is complete in
                system, _, code = named[0].partition("|")
                why = f"{system_name(system)} code {code} is not one this service lists"
                self.inputs.unread(prop, source_of(r).reference, record_name(concepts), why)
                return
        gap = filter_gap(m, r) if m.where is not None else None
        if gap is not None:
            self.inputs.unread(prop, source_of(r).reference, record_name([r.get("code")]), gap)

    def _is_about_focus_quietly(self, r: Mapping[str, Any]) -> bool:
        whom = about(r)
        focus = f"{FOCUS_TYPE}/{self.focus_id}"
        return whom is not None and (refers_to(whom, focus) or whom == self.focus_id)

    def _literal_value(
        self,
        prop: PropertyDef,
        m: FhirMapping,
        r: Mapping[str, Any],
        raw: Any,
    ) -> tuple[Any, str | None] | None:
        """The value (and its unit) of ``raw`` as ``prop`` stores it; None when it is not used
        (the violation and the refused input are recorded)."""
        src = source_of(r)
        value: Any = raw
        unit: str | None = None
        if isinstance(raw, NotANumber):
            self._problem("range", prop, raw.shown, src, raw.why)
            return None
        if m.transform == "PeriodDays":
            value = period_days(raw)
            if value is None:
                return None  # an open or undated period has no length
        elif prop.range == _DATE and isinstance(raw, str) and "T" in raw:
            day = calendar_date(raw)  # a dateTime read as a date keeps its day as written
            if day is None:
                self._problem("range", prop, raw, src, f"{raw!r} is not a date")
                return None
            value = day.isoformat()
        elif m.transform == "YearsSince":
            try:
                value = years_since(str(raw), self.now)
            except ValueError:
                self._problem("range", prop, raw, src, f"{raw!r} is not a date")
                return None
        elif isinstance(raw, dict) and "value" in raw:
            try:
                value = Decimal(str(raw["value"]))
            except InvalidOperation:
                self._problem("range", prop, raw, src, "not a number")
                return None
            # a code is UCUM only in the UCUM system (or with no system); display text never
            # is, unless it is literally the unit wanted
            code = raw.get("code") if raw.get("system") in (None, UCUM) else None
            display = raw.get("unit")
            unit = code if code is not None else display
            if prop.unit is not None:
                if code is None:
                    if display != prop.unit:
                        why = not_ucum(raw, prop.unit)
                        said = unit_refusal(raw, prop.unit)
                        self._problem("unit", prop, raw.get("value"), src, why, said)
                        return None
                    unit = prop.unit
                else:
                    try:
                        value, unit = convert(value, str(code), prop.unit), prop.unit
                    except UnitError as exc:
                        said = unit_refusal(raw, prop.unit)
                        self._problem("unit", prop, raw.get("value"), src, str(exc), said)
                        return None
            comparator = raw.get("comparator")
            if comparator in COMPARATORS:
                return self._bounded(prop, src, raw, str(comparator), value, unit)
        elif isinstance(raw, float):
            value = Decimal(repr(raw))
        if prop.range == XSD + "integer" and isinstance(value, Decimal):
            value = int(value) if value == value.to_integral_value() else value
        return value, unit

    def _bounded(
        self,
        prop: PropertyDef,
        src: Source,
        raw: Mapping[str, Any],
        comparator: str,
        bound: Decimal,
        unit: str | None,
    ) -> tuple[Any, str | None] | None:
        """A reading given as a bound (``<30``): read as one value inside it when every
        condition on the property answers alike for the whole interval, else refused."""
        written = f"{comparator}{raw.get('value')}" + (
            f" {raw.get('unit') or raw.get('code')}" if raw.get("unit") or raw.get("code") else ""
        )
        inside = representative(self.o.conditions_on(prop.iri), comparator, bound)
        if inside is None:
            shown_unit = raw.get("unit") or raw.get("code")
            shown = f"{comparator}{raw.get('value')}" + (
                f" {unit_display(str(shown_unit))}" if shown_unit else ""
            )
            why = f"it was reported as {shown!r}, a bound, and the rules' thresholds lie within it"
            self._problem("range", prop, raw.get("value"), src, why)
            return None
        self.out.notes.append(
            DataNote(
                rule="bounded-value",
                field=f"{src.reference} value",
                received=written,
                read_as=str(inside),
                message=(
                    f"{src.reference}: {label_of(prop)} reported as {written!r} is read as "
                    f"{inside}, which every rule on it reads as it reads the whole bound"
                ),
            )
        )
        return inside, unit

    def _assert_literal(
        self,
        prop: PropertyDef,
        m: FhirMapping,
        r: Mapping[str, Any],
        raw: Any,
        subject: str | None = None,
    ) -> None:
        read = self._literal_value(prop, m, r, raw)
        if read is None:
            return
        value, unit = read
        if prop.range == _STRING and isinstance(value, str):
            self.codes.note_tested(prop.iri, value, source_of(r).reference)
        who = subject if subject is not None else self.focus_id
        self.out.changes.append(Assert(who, prop.iri, value, source_of(r), None, unit))

    # --- object properties: coded resources become instances -------------------------------

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
            (coding for concept in concepts for coding in _codings(concept, self.canonical)),
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
            text_only = not any(_codings(c, self.canonical) for c in concepts)
            if verdict == "unread" and text_only and r.get("resourceType") in self._text_types:
                return  # its text is the run's free text, read by the PerceptionStep
            if verdict == "unread" and self._about_focus(r, prop.iri):
                name = record_name(concepts)
                self.inputs.unread(prop, source_of(r).reference, name, why)
            if not acted_on:
                return  # none of ours, or unread: not a fact of the range tree
            cls = prop.range  # acted on: an instance, whatever is known of it
        if not self._about_focus(r, prop.iri):
            return
        src = source_of(r)
        instance_id = self._instance_id(r, cls, from_context=acted_on)
        self.out.changes.append(Assert(self.focus_id, prop.iri, instance_id, src))

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

    def _problem(
        self,
        code: ViolationCode,
        prop: PropertyDef,
        value: Any,
        src: Source,
        message: str,
        said: str | None = None,
    ) -> None:
        """A value of ``prop`` read from ``src`` is not used: a violation (``message``) and a
        refused input (``said``, in a clinician's words; ``message`` when not given)."""
        problem = Violation(code, self.focus_id, prop.iri, value, f"{src.reference}: {message}")
        self.out.violations.append(problem)
        self.inputs.refused(prop, src.reference, said or message)

    def _unusable(self, m: FhirMapping, r: Mapping[str, Any]) -> str | None:
        """Why a resource about the focus that the mapping's code and ``horis:where`` select
        gives no value (its status, or no value at all); None when it is not such a resource."""
        if not self._is_about_focus_quietly(r):
            return None
        if not (m.codings or m.value_sets) or self._coded(m, r.get("code")):
            nodes: list[Mapping[str, Any]] = [r]
        else:
            nodes = [
                c
                for c in r.get("component") or []
                if isinstance(c, dict) and self._coded(m, c.get("code"))
            ]
        if not nodes or (m.where is not None and evaluate(r, m.where) != [True]):
            return None
        problem = record_problem(r)
        if problem is not None:
            return problem
        absent = [n for n in nodes if ABSENT in n]
        return absent_reason(absent[0]) if len(absent) == len(nodes) else None


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
