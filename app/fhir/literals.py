"""Literal-valued properties read from FHIR: the readings a mapping selects, the one kept
(``Latest`` or ``All``, never one stamped in the future or too old) and its value as the property
stores it (a Quantity converted with UCUM, a date, years since a date, a bound read as a value).

A mixin of ``app.fhir.hydrate._Hydrator``, whose attributes and helpers it uses; the instances'
own properties (``app.fhir.instances``) assert their values through it too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from app.data_notes import DataNote
from app.fhir.bounds import COMPARATORS, representative, same_answers
from app.fhir.inputs import is_stale, label_of, unit_refusal
from app.fhir.links import calendar_date, period_days
from app.fhir.reading import as_codings, evaluate, source_of
from app.fhir.records import (
    ABSENT,
    UCUM,
    absent_reason,
    components,
    earliest,
    not_ucum,
    record_problem,
)
from app.fhir.times import UNDATED, effective, when_key, years_since
from app.fhir.unread import filter_gap, record_name, system_name
from app.fhir.values import NotANumber, other_value, values_in_components
from app.ontology.model import XSD, FhirMapping, PropertyDef
from app.ucum import UnitError, annotations_of, convert
from app.ucum import display as unit_display
from app.world.facts import Assert, Source, Violation, ViolationCode

log = logging.getLogger("horismos.hydration")

if TYPE_CHECKING:
    from app.fhir.codes import CodeClassifier
    from app.fhir.hydration import Hydration
    from app.fhir.inputs import InputRecorder
    from app.ontology.model import Ontology

_DATE = XSD + "date"
_STRING = XSD + "string"


class LiteralReading:
    """The part of the hydrator that reads literal-valued properties of the focus."""

    if TYPE_CHECKING:
        o: Ontology
        codes: CodeClassifier
        canonical: Callable[[str], str]
        focus_id: str
        now: datetime
        out: Hydration
        inputs: InputRecorder
        _at: datetime
        _latest: datetime

        def _candidates(self, m: FhirMapping) -> list[dict[str, Any]]: ...

        def _targets(self, m: FhirMapping, r: dict[str, Any]) -> list[Mapping[str, Any]]: ...

        def _linked(
            self,
            m: FhirMapping,
            r: Mapping[str, Any],
            targets: list[Mapping[str, Any]],
            prop: PropertyDef | None = None,
        ) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]: ...

        def _coded(
            self, m: FhirMapping, concept: Any, record: Mapping[str, Any] | None = None
        ) -> bool: ...

        def _concept_codings(self, concept: Any) -> list[str]: ...

        def _record_systems(self, r: Mapping[str, Any], concepts: list[Any]) -> frozenset[str]: ...

        def _systems(self, m: FhirMapping) -> frozenset[str]: ...

        def _record_facts(self, r: Mapping[str, Any]) -> tuple[bool, bool, datetime]: ...

        def _selectable(self, prop: PropertyDef, m: FhirMapping) -> list[dict[str, Any]]: ...

        def _about_focus(self, r: Mapping[str, Any], prop: str | None) -> bool: ...

        def _is_about_focus_quietly(self, r: Mapping[str, Any]) -> bool: ...

    def _datum(self, prop: PropertyDef, m: FhirMapping) -> None:
        found: list[tuple[datetime, Mapping[str, Any], Any]] = []
        unusable: list[tuple[Mapping[str, Any], str]] = []
        names_codes = bool(m.codings or m.value_sets)
        # another reading's records are left out: nothing to select, nothing unread
        for r in self._selectable(prop, m) if names_codes else self._candidates(m):
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
                try:
                    values = evaluate(node, m.fhir_path)
                except Exception as exc:  # the engine's error: said, not raised
                    # the FHIRPath engine cannot evaluate the reading on this record (a value
                    # of another type than the expression compares with): refused, named on
                    # the run's record, and logged whole (it may be an engine's own bug)
                    log.warning(
                        "reading %s of %s failed on %s",
                        m.fhir_path,
                        prop.name,
                        r.get("id"),
                        exc_info=True,
                    )
                    why = f"its reading ({m.fhir_path}) cannot be evaluated on it: {exc}"
                    self.inputs.refused(prop, source_of(r).reference, why)
                    continue
                if not values and (other := other_value(node, m.fhir_path)) is not None:
                    values = [other]  # a number written another way: parsed, or refused
                if not values and node is r and values_in_components(r, m.fhir_path):
                    # its values are in components none of which this reading is coded as:
                    # the result is there, so it is never skipped for an older one
                    why = "its values are in components, none coded as a reading this service lists"
                    self.inputs.unread(
                        prop, source_of(r).reference, record_name([r.get("code")]), why
                    )
                    continue
                for v in values:
                    for item in as_codings(v, self.canonical) if prop.range == _STRING else (v,):
                        if item is not None:
                            found.append((when_key(effective(r)), origin, item))
        found = self._not_in_future(prop, found)
        if not found:
            for res, why in unusable:  # only unusable readings: say why none was read
                self.inputs.refused(prop, source_of(res).reference, why)
            return
        if m.max_age is not None:
            fresh = [f for f in found if not is_stale(f[0], self._at, m.max_age)]
            if not fresh:
                when, latest, _raw = max(found, key=lambda f: f[0])
                taken = None if when == UNDATED else when
                self.inputs.stale(prop, m, source_of(latest).reference, taken)
                return
            found = fresh
        if m.pick == "Latest":
            found.sort(key=lambda item: item[0], reverse=True)
            tied = [f for f in found if f[0] == found[0][0]]
            if len(tied) > 1:
                self._latest_of_tied(prop, m, tied)
                return
            found = found[:1]
        for _when, origin, raw in found:
            self._assert_literal(prop, m, origin, raw)

    def _not_in_future(
        self, prop: PropertyDef, found: list[tuple[datetime, Mapping[str, Any], Any]]
    ) -> list[tuple[datetime, Mapping[str, Any], Any]]:
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
        self, prop: PropertyDef, m: FhirMapping, tied: list[tuple[datetime, Mapping[str, Any], Any]]
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
            if not self._record_systems(r, concepts) & systems:
                coded = [c for concept in concepts for c in self._concept_codings(concept)]
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
                coded = [c for concept in concepts for c in self._concept_codings(concept)]
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
                        implied = self._implied(value, str(code), prop, m, src)
                        if implied is None:
                            said = unit_refusal(raw, prop.unit)
                            self._problem("unit", prop, raw.get("value"), src, str(exc), said)
                            return None
                        value, unit = implied, prop.unit
            comparator = raw.get("comparator")
            bounded_by_context = False
            if comparator is None and m.upper_bound_when is not None:
                # what was measured bounds the quantity the rules are about from above
                bounded_by_context = evaluate(r, m.upper_bound_when) == [True]
                comparator = "<=" if bounded_by_context else None
            if comparator in COMPARATORS:
                return self._bounded(
                    prop, src, raw, str(comparator), value, unit, in_context=bounded_by_context
                )
        elif isinstance(raw, float):
            value = Decimal(repr(raw))
        if prop.range == XSD + "integer" and isinstance(value, Decimal):
            value = int(value) if value == value.to_integral_value() else value
        return value, unit

    def _implied(
        self, value: Decimal, code: str, prop: PropertyDef, m: FhirMapping, src: Source
    ) -> Decimal | None:
        """``value`` in ``code`` read in the property's unit when the only thing ``code`` lacks
        is an annotation the mapping's codes define (``horis:codesImply``: an eGFR reported in
        ``mL/min`` under a LOINC code that is the rate per 1.73 m²), with a data-quality note;
        ``None`` otherwise."""
        target = prop.unit or ""
        for annotation in m.codes_imply:
            if annotations_of(code) or not target.endswith("/" + annotation):
                continue
            try:
                read = convert(value, f"{code}/{annotation}", target)
            except UnitError:
                continue
            self.out.notes.append(
                DataNote(
                    rule="unit-annotation-implied-by-code",
                    field=f"{src.reference} value",
                    received=code,
                    read_as=target,
                    message=(
                        f"{src.reference}: {label_of(prop)} reported in {code!r} is read in "
                        f"{target!r}: the code it is reported under defines {annotation}"
                    ),
                )
            )
            return read
        return None

    def _bounded(
        self,
        prop: PropertyDef,
        src: Source,
        raw: Mapping[str, Any],
        comparator: str,
        bound: Decimal,
        unit: str | None,
        *,
        in_context: bool = False,
    ) -> tuple[Any, str | None] | None:
        """A reading given as a bound (``<30``), or one its context makes a bound
        (``in_context``: the mapping's ``horis:upperBoundWhen`` holds): read as one value inside
        it when every condition on the property answers alike for the whole interval, else
        refused."""
        written = f"{comparator}{raw.get('value')}" + (
            f" {raw.get('unit') or raw.get('code')}" if raw.get("unit") or raw.get("code") else ""
        )
        inside = representative(self.o.conditions_on(prop.iri), comparator, bound)
        if inside is None:
            shown_unit = raw.get("unit") or raw.get("code")
            shown = f"{comparator}{raw.get('value')}" + (
                f" {unit_display(str(shown_unit))}" if shown_unit else ""
            )
            how = (
                f"it was taken where it is only an upper bound ({shown})"
                if in_context
                else f"it was reported as {shown!r}, a bound"
            )
            why = f"{how}, and the rules' thresholds lie within it"
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
        if not self._record_facts(r)[1]:  # about the focus, once per resource
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
