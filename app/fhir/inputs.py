"""The input status hydration records: for every FHIR-mapped property, whether its inputs came
in complete, and if not why, in a clinician's words (``app.world.inputs`` defines the states).

Hydration calls :class:`InputRecorder` as it reads:

- ``refused`` when data was there but not admitted: a unit that is not UCUM or cannot be
  converted, a resource about another patient, a reading whose status makes it no result (the
  only readings cancelled, entered in error, without a value), a value the World's gate refused;
- ``stale`` when every reading is older than the mapping's ``horis:maxAge`` at the hook's time;
- ``truncated`` when a search feeding the property was cut off (page or byte budget, a paging
  loop): more data may exist, so what was read is never the whole answer;
- ``absent`` when no value came in at all, unless the property is a record list declared
  ``horis:absentMeans horis:None`` and every search feeding it was answered whole: then an
  empty answer means there is none (closed world) and the input is complete.

Which prefetch keys feed a property is read from the templates: a key feeds the mappings of the
resource type its query reads (``Observation?patient=…`` feeds every ``Observation`` mapping).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from app.fhir.records import refers_to
from app.ontology.model import (
    FhirMapping,
    Ontology,
    PrefetchTemplate,
    PropertyDef,
    TextSource,
    WorkflowDef,
    humanise,
)
from app.ontology.workflows import PerceptionStep
from app.ucum import is_ucum
from app.world.facts import Violation
from app.world.inputs import InputReason, InputState, InputStatus

if TYPE_CHECKING:
    from app.data_notes import Unreadable

UCUM = "http://unitsofmeasure.org"


@functools.lru_cache(maxsize=4096)
def query_type(query: str) -> str:
    """The resource type a prefetch query reads: ``Observation?patient=…`` → ``Observation``
    (remembered: a service's few templates are asked about on every call)."""
    return re.split(r"[/?]", query.strip(), maxsplit=1)[0]


def label_of(prop: PropertyDef) -> str:
    """How a clinician names the property: its ``rdfs:label``, else its local name."""
    return prop.label or prop.name


def _kind(reference: str | None) -> str:
    """What kind of record a reference names, in words: ``MedicationRequest/o1`` →
    ``medication request``; ``record`` when it names no resource type."""
    rtype = (reference or "").split("/", 1)[0]
    if not rtype or not rtype[:1].isupper() or "." in rtype:
        return "record"
    return humanise(rtype).lower()


def _noun(prop: PropertyDef) -> str:
    return "record" if prop.is_object else "reading"


def _sentence(text: str) -> str:
    """``text`` starting a sentence: its first letter upper case, unless its first word is
    written in mixed case as it stands (``eGFR``, ``pH``)."""
    first = text.split(" ", 1)[0]
    if any(c.isupper() for c in first[1:]):
        return text
    return text[:1].upper() + text[1:]


def span(seconds: float) -> str:
    """A ``horis:maxAge`` in words: ``21600`` → ``6 h``, ``7776000`` → ``90 days``."""
    whole = int(seconds)
    for size, one, many in ((86_400, "day", "days"), (3_600, "h", "h"), (60, "min", "min")):
        if whole >= size and whole % size == 0:
            n = whole // size
            return f"{n} {one if n == 1 else many}"
    return f"{whole} s"


def unit_refusal(quantity: Mapping[str, Any], wanted: str) -> str:
    """Why a Quantity's unit cannot be read as ``wanted``, in a clinician's words, with the
    reading as it was written (a clinician may act on the value the rules could not use)."""
    why = _unit_why(quantity, wanted)
    value, unit = quantity.get("value"), quantity.get("unit") or quantity.get("code")
    if value is None:
        return why
    return f"{why} (the reading was {value}{'' if unit is None else ' ' + str(unit)})"


def _unit_why(quantity: Mapping[str, Any], wanted: str) -> str:
    system, code, display = quantity.get("system"), quantity.get("code"), quantity.get("unit")
    if system not in (None, UCUM):
        shown = code if code is not None else display
        return f"unit {shown!r} is not a recognized unit (its system is {system})"
    if code is None:
        if display is None:
            return "the value has no unit"
        return f"unit {display!r} is not a recognized unit"
    if not is_ucum(str(code)):
        return f"unit {code!r} is not a recognized unit"
    return f"unit {code!r} cannot be converted to {wanted!r}"


class InputRecorder:
    """Records one hydration's input status as it reads (see the module docstring)."""

    def __init__(
        self,
        status: InputStatus,
        *,
        data: Mapping[str, Any],
        context: Mapping[str, Any],
        prefetch: Sequence[PrefetchTemplate] | None,
        truncated: Mapping[str, str],
        errors: Mapping[str, str] | None = None,
        invalid: Mapping[str, Sequence[Unreadable]] | None = None,
        read_types: frozenset[str] = frozenset(),
    ) -> None:
        self.status = status
        #: the resource types the focus's own mappings read from prefetch: a record of one of
        #: them in another type's answer is read where it belongs, not unread here
        self._read_types = read_types
        self._data = data
        self._context = context
        self._prefetch = prefetch
        self._truncated = truncated
        self._errors = errors or {}
        self._invalid = invalid or {}
        #: (key, type searched) -> the records of another type it answered, found once per call
        self._others: dict[tuple[str, str], list[Mapping[str, Any]]] = {}

    def read(self, prop: PropertyDef) -> None:
        self.status.read(prop.iri)

    def _note(self, prop: PropertyDef, state: InputState, source: str | None, detail: str) -> None:
        self.status.note(prop.iri, InputReason(state=state, source=source, detail=detail))

    def refused(self, prop: PropertyDef, source: str | None, why: str) -> None:
        """A value of ``prop`` was there and not admitted, for the reason ``why``."""
        said = f"{_sentence(label_of(prop))} {_noun(prop)} not used: {why}"
        self._note(prop, "refused", source, said)

    def unread(self, prop: PropertyDef, source: str | None, name: str | None, why: str) -> None:
        """A record that could have fed ``prop`` is there but could not be read, for ``why``:
        named as a reader knows it (its own name, and what kind of record it is); the
        reference stays in the reason's ``source``."""
        kind = _kind(source)
        article = "an" if kind[:1] in "aeiou" else "a"
        what = f"{name!r} ({kind})" if name else f"{article} {kind}"
        said = f"{_sentence(label_of(prop))}: {what} could not be read: {why}"
        self._note(prop, "unread", source, said)

    def conflicting(self, prop: PropertyDef, source: str | None, detail: str) -> None:
        """Readings of ``prop`` taken at the same instant disagree in what they decide."""
        self._note(prop, "conflicting", source, detail)

    def stale(
        self, prop: PropertyDef, m: FhirMapping, source: str | None, taken: datetime | None
    ) -> None:
        """Every reading of ``prop`` is older than the mapping's ``horis:maxAge``."""
        assert m.max_age is not None
        latest = (
            f"the latest was taken {taken.date().isoformat()}"
            if taken is not None
            else "the latest has no time"
        )
        self._note(
            prop, "stale", source, f"No {label_of(prop)} in the last {span(m.max_age)}: {latest}"
        )

    def unresolved(self, prop: PropertyDef, source: str, reference: str) -> None:
        """A resource read for ``prop`` names, through ``horis:via``, one the call did not read."""
        said = (
            f"{_sentence(label_of(prop))} not read: {source} refers to {reference}, which the "
            "service did not receive"
        )
        self._note(prop, "absent", source, said)

    def _keys(self, m: FhirMapping) -> list[str]:
        """The prefetch keys that feed mapping ``m`` (none when the templates are unknown)."""
        if self._prefetch is None or m.context_key is not None:
            return []
        return [t.key for t in self._prefetch if query_type(t.query) == m.resource_type]

    def _other_records(self, key: str, resource_type: str) -> list[Mapping[str, Any]]:
        """The records a search of ``resource_type`` answered under ``key`` that are of another
        type (a MedicationStatement among the MedicationRequests of a medications search): a
        match the service cannot read, never an included resource (``search.mode`` include,
        or one another entry refers to), the server's OperationOutcome, nor a record of a
        type the service's own mappings read (a service that reads MedicationStatements itself)."""
        known = self._others.get((key, resource_type))
        if known is not None:
            return known
        found = self._others[(key, resource_type)] = self._find_others(key, resource_type)
        return found

    def _find_others(self, key: str, resource_type: str) -> list[Mapping[str, Any]]:
        value = self._data.get(key)
        if not isinstance(value, Mapping) or value.get("resourceType") != "Bundle":
            return []
        entries = [
            e
            for e in value.get("entry") or []
            if isinstance(e, Mapping) and isinstance(e.get("resource"), Mapping)
        ]
        others: list[Mapping[str, Any]] = []
        for e in entries:
            r = e["resource"]
            search = e.get("search")
            mode = search.get("mode") if isinstance(search, Mapping) else None
            rtype = r.get("resourceType")
            if (
                rtype not in (resource_type, "OperationOutcome")
                and rtype not in self._read_types
                and mode not in ("include", "outcome")
            ):
                others.append(r)
        if not others:  # the usual answer: nothing to look for among the references
            return others
        referenced = {ref for e in entries for ref in _references(e["resource"])}
        return [
            r
            for r in others
            if not any(
                refers_to(ref, f"{r.get('resourceType')}/{r.get('id')}") for ref in referenced
            )
        ]

    def settle(self, prop: PropertyDef, *, has_value: bool) -> None:
        """After every mapping of ``prop`` was read: its truncated searches, and whether having
        no value is an absent input or (closed world, every search answered whole) none."""
        answered = True
        fed = False
        for m in prop.from_fhir:
            if m.context_key is not None:
                fed = True
                answered = answered and self._context.get(m.context_key) is not None
                continue
            for key in self._keys(m):
                fed = True
                if key in self._errors:
                    self._note(
                        prop,
                        "truncated",
                        f"prefetch.{key}",
                        f"The {key!r} search came back with an error from the EHR "
                        f"({self._errors[key]}): {label_of(prop)} data may exist that was "
                        "not received",
                    )
                for bad in self._invalid.get(key, ()):
                    # an unknown type could be anything the key returns
                    if bad.resource_type in (m.resource_type, "Bundle", ""):
                        self.unread(prop, bad.reference, None, f"it is not valid FHIR: {bad.why}")
                for other in self._other_records(key, m.resource_type):
                    self.unread(
                        prop,
                        f"{other.get('resourceType')}/{other.get('id')}",
                        None,
                        f"it is a {other.get('resourceType')}, where this service reads "
                        f"{m.resource_type} records in the {key!r} answer",
                    )
                if key in self._truncated:
                    self._note(
                        prop,
                        "truncated",
                        f"prefetch.{key}",
                        f"The {key!r} search was cut off ({self._truncated[key]}): more "
                        f"{label_of(prop)} data may exist than was read",
                    )
                if self._data.get(key) is None:
                    answered = False
            if self._prefetch is not None and not self._keys(m):
                answered = False  # no key reads this resource type: nothing could come in
        if has_value or not self.status.of(prop.iri).complete:
            return
        if prop.closed_world and answered:
            return  # an answered search without a match: there is none
        self._note(prop, "absent", None, self._absent_words(prop, fed=fed, answered=answered))

    def _absent_words(self, prop: PropertyDef, *, fed: bool, answered: bool) -> str:
        name = label_of(prop)
        if answered or not fed:
            return f"No {name} {_noun(prop)} in the data the service received"
        missing = sorted(
            {key for m in prop.from_fhir for key in self._keys(m) if self._data.get(key) is None}
            | {
                f"context.{m.context_key}"
                for m in prop.from_fhir
                if m.context_key is not None and self._context.get(m.context_key) is None
            }
        )
        where = ", ".join(repr(k) for k in missing)
        return f"No {name}: no data for {where} (not provided or null)"


def is_stale(when: datetime, now: datetime, max_age: float | None) -> bool:
    """Whether a reading taken at ``when`` is older than ``max_age`` seconds at ``now``."""
    return max_age is not None and (now - when).total_seconds() > max_age


def note_gate_refusals(
    status: InputStatus, properties: Mapping[str, PropertyDef], violations: Sequence[Violation]
) -> None:
    """Values hydration read but the World's gate refused (out of range, not allowed): each is a
    *refused* input of its property."""
    for v in violations:
        prop = properties.get(v.property) if v.property is not None else None
        if prop is None or not prop.from_fhir:
            continue
        said = f"{_sentence(label_of(prop))} {_noun(prop)} not used: {v.message}"
        status.note(prop.iri, InputReason(state="refused", source=v.subject, detail=said))


def note_unread_text(
    status: InputStatus,
    ontology: Ontology,
    workflow: WorkflowDef,
    *,
    texts: Sequence[TextSource],
    prefetch: Sequence[PrefetchTemplate],
    data: Mapping[str, Any],
) -> None:
    """When the resource carrying the run's free text was not received (every prefetch key
    reading its type is null or missing), what the workflow's PerceptionSteps would have read
    from it is unknown: each property of the focus whose range is a class they extract (other
    than the focus's) is an *absent* input. A resource received without text is no such gap:
    nothing was written there."""
    if workflow.focus is None:
        return
    unread = [
        (t, keys)
        for t in texts
        if (keys := [p.key for p in prefetch if query_type(p.query) == t.resource_type])
        and all(data.get(k) is None for k in keys)
    ]
    if not unread:
        return
    extracted: set[str] = set()
    for step in workflow.steps.values():
        if isinstance(step, PerceptionStep):
            for c in step.extracts:
                if c != workflow.focus:
                    extracted.update(ontology.subclasses(c))
    for prop in ontology.properties_of(workflow.focus):
        if prop.range not in extracted:
            continue
        for t, keys in unread:
            where = ", ".join(repr(k) for k in keys)
            status.note(
                prop.iri,
                InputReason(
                    state="absent",
                    source=f"prefetch.{keys[0]}",
                    detail=f"{_sentence(label_of(prop))} not read from the free text: no data for "
                    f"{where}, which carries the {t.resource_type}'s text",
                ),
            )


def _references(node: Any) -> Iterator[str]:
    """Every ``reference`` string in a resource's JSON."""
    if isinstance(node, Mapping):
        for k, v in node.items():
            if k == "reference" and isinstance(v, str):
                yield v
            else:
                yield from _references(v)
    elif isinstance(node, list):
        for item in node:
            yield from _references(item)
