"""Classes, individuals and properties: what the World's facts may say, how a property is read
from FHIR or computed, and the value sets and concept maps that give classes their codes."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from app.ontology.names import XSD
from app.ontology.rules import Condition

Datatype = Literal[
    "xsd:decimal", "xsd:integer", "xsd:string", "xsd:boolean", "xsd:dateTime", "xsd:date"
]
Cardinality = Literal["0..1", "1..1", "0..*", "1..*"]
Resolution = Literal["Reject", "FirstListed"]
Pick = Literal["Latest", "All"]
AggregateFunction = Literal["Count", "Sum", "Min", "Max", "DaysCovered"]
#: ``horis:absentMeans``: ``Unknown`` (no value is unknown: a measurement), ``None`` (closed
#: world: an answered search without a match means there is none, for record lists only) or
#: ``Unread`` (a property of a record: a record read without a value for it is *unread*)
AbsentMeans = Literal["None", "Unknown", "Unread"]


@dataclass(frozen=True, kw_only=True)
class ClassDef:
    """``X a horis:Class`` (a root) or ``X rdfs:subClassOf Y`` (a subclass)."""

    iri: str
    name: str
    parents: tuple[str, ...] = ()  # rdfs:subClassOf
    codes: tuple[str, ...] = ()  # horis:code "system|code"
    one_of: tuple[str, ...] = ()  # horis:oneOf (individuals): an enumeration class
    label: str | None = None  # rdfs:label
    value_sets: tuple[str, ...] = ()  # horis:inValueSet <canonical>: its codes are the members
    #: horis:valueSet "<canonical>|<version>": the pinned value sets among ``value_sets``
    pinned: tuple[str, ...] = ()
    #: horis:namedBy P: the string property whose value names an instance for a reader
    named_by: str | None = None


@dataclass(frozen=True, kw_only=True)
class Individual:
    """A named member of an enumeration class (``:Immediate a :AcuityLevel``)."""

    iri: str
    name: str
    class_iri: str
    codes: tuple[str, ...] = ()  # horis:code "system|code" (e.g. v3 ActPriority for a queue)
    label: str | None = None


@dataclass(frozen=True, kw_only=True)
class FhirMapping:
    """``P horis:fromFhir [ … ]``: how a property is read from FHIR resources.

    The adapter selects resources of ``resource_type`` (from prefetch, or from the hook's
    ``context`` key ``context_key`` such as ``draftOrders``), keeps those whose code matches one of
    ``codings`` (for Observations also a component with that code), whose ``where`` FHIRPath is
    true, evaluates ``fhir_path`` and picks ``Latest`` (by effective time) or ``All``.
    """

    resource_type: str  # horis:resourceType
    fhir_path: str  # horis:fhirPath, relative to the resource (or the matching component)
    codings: tuple[str, ...] = ()  # horis:coding "system|code" (any of)
    where: str | None = None  # horis:where, a FHIRPath boolean on the resource
    pick: Pick = "Latest"  # horis:pick horis:Latest | horis:All
    context_key: str | None = None  # horis:fromContext "draftOrders"
    #: horis:transform horis:YearsSince (whole years to the hook's time) | horis:PeriodDays
    #: (whole days from a Period's start to its end)
    transform: Literal["YearsSince", "PeriodDays"] | None = None
    #: horis:maxAge "PT6H" in seconds: a resource older than this at the hook's time is stale
    max_age: float | None = None
    value_sets: tuple[str, ...] = ()  # horis:inValueSet <canonical>: the code is a member (any)
    #: horis:via "medicationReference": follow this Reference (contained or read in the same
    #: call) and evaluate ``fhir_path`` on the resource it names
    via: str | None = None
    #: horis:missingExcludes "category": elements ``where`` reads whose absence means the record
    #: is not one this mapping reads (else a record missing one is *unread*, not left out)
    missing_excludes: tuple[str, ...] = ()
    #: horis:upperBoundWhen: a FHIRPath boolean; where true, the value read is an upper bound
    #: of the quantity (read as ``<=`` the value)
    upper_bound_when: str | None = None
    #: horis:codesImply "{1.73_m2}": UCUM annotations of the property's unit that the mapping's
    #: codes define, so a reading whose unit lacks one is read as carrying it (with a note)
    codes_imply: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class AggregateDef:
    """``P horis:aggregate [ horis:function horis:Sum ; horis:over ( :hasOrder ) ; horis:of :mme ;
    horis:where ( … ) ]``: P's value computed by the World, never asserted.

    The values reached from the subject along any ``over`` path (several paths: their union,
    each value once) that satisfy every ``where`` condition are kept; with ``of`` the kept
    instances' values of that property are aggregated, else the kept values themselves. Count
    and Sum of nothing are 0; Min and Max of nothing leave P unassigned. An aggregate reads its
    inputs complete, like negation: it sits in a stratum above everything it reads.
    """

    function: AggregateFunction  # horis:function horis:Count | Sum | Min | Max | DaysCovered
    over: tuple[tuple[str, ...], ...]  # horis:over ( p1 p2 … ), several allowed
    of: str | None = None  # horis:of P
    where: tuple[Condition, ...] = ()  # horis:where ( conditions on each reached value )
    #: DaysCovered only: each kept instance covers the days from its ``start`` to its ``end``
    #: (or ``start`` plus ``length`` days), counted within the window from ``window_from``
    #: before now to ``window_to`` before now
    span: SpanDef | None = None
    #: keep a reached instance only when it is dated within a window before the subject's date
    dated: DatedDef | None = None
    #: keep a reached instance only when a value of it equals a value of the subject
    sharing: SharingDef | None = None


@dataclass(frozen=True, kw_only=True)
class SharingDef:
    """``horis:sharing [ horis:property P ; horis:anchor A ]`` in an aggregate: a reached
    instance is kept only when some value of its P equals some value of the subject's A (the
    prescriber of an order being signed is the author of the plan)."""

    property: str
    anchor: str


@dataclass(frozen=True, kw_only=True)
class DatedDef:
    """``horis:dated [ horis:property P ; horis:anchor A ; horis:windowFrom "P31D" ;
    horis:windowTo "P1D" ]`` in an aggregate: a reached instance is kept only when some value of
    its P (a date) lies on a day from ``window_from`` to ``window_to`` before the day of some
    value of the subject's A ("prescribed in the month before the screen")."""

    property: str
    anchor: str
    window_from: str
    window_to: str = "P0D"


@dataclass(frozen=True, kw_only=True)
class SpanDef:
    """The span of each instance a ``horis:DaysCovered`` aggregate keeps, and its window:
    ``horis:start P`` (a date), ``horis:end P`` (a date) or ``horis:lengthDays P`` (a number of
    days), ``horis:windowFrom "P10D"`` and ``horis:windowTo "P0D"`` (durations before now)."""

    start: str
    end: str | None = None
    length: str | None = None
    window_from: str
    window_to: str = "P0D"


@dataclass(frozen=True, kw_only=True)
class PropertyDef:
    """``P a horis:Property`` with its constraints."""

    iri: str
    name: str
    domain: str  # horis:domain (class IRI)
    range: str  # horis:range: an xsd datatype IRI or a class IRI
    cardinality: Cardinality = "0..*"
    min: Decimal | None = None
    max: Decimal | None = None
    unit: str | None = None  # UCUM
    pattern: str | None = None
    one_of: tuple[str, ...] = ()  # on the property, or inherited from an enumeration range
    rules_only: bool = False  # horis:assignedBy horis:RulesOnly
    resolution: Resolution = "Reject"
    from_fhir: tuple[FhirMapping, ...] = ()
    label: str | None = None
    #: horis:absentMeans as declared; None when not declared (then it means ``Unknown``)
    absent_means: AbsentMeans | None = None
    #: horis:inverseOf Q…: hydration asserts (o, this, s) for every (s, Q, o) it reads
    inverse_of: tuple[str, ...] = ()
    aggregate: AggregateDef | None = None  # horis:aggregate [ … ]: computed, never asserted
    #: horis:closedOver "system"…: the code systems in which this property's code lists (its
    #: range's classes, or the value sets its conditions test) are complete, so that a code of
    #: such a system that none lists is *none of ours*; a code of any other system is *unread*
    closed_over: tuple[str, ...] = ()
    #: horis:knownOutside <ValueSet>…: value sets of codes known to be none of this property's
    #: (a record coded with one is *none of ours*, whatever its system)
    known_outside: tuple[str, ...] = ()

    @property
    def closed_world(self) -> bool:
        """Whether an answered search without a match means *none* (``horis:absentMeans
        horis:None``) rather than *unknown*."""
        return self.absent_means == "None"

    @property
    def is_object(self) -> bool:
        return not self.range.startswith(XSD)

    @property
    def single_valued(self) -> bool:
        return self.cardinality in ("0..1", "1..1")

    @property
    def required(self) -> bool:
        return self.cardinality.startswith("1")


# --- value sets and concept maps -----------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ValueSetDef:
    """A FHIR ValueSet read from the deployment's ``valuesets`` folder (``app.ontology.valuesets``):
    its canonical URL, its members as ``system|code``, and the file it was read from."""

    url: str
    name: str
    codes: frozenset[str]
    source: str
    version: str | None = None
    #: for a supplement (``valuesets/supplements``): how its codes derive from the value set's
    #: own members (its ``description``), said in the note of a record it counts
    derived: str | None = None
    #: its members' displays, as listed
    displays: frozenset[str] = frozenset()


@dataclass(frozen=True, kw_only=True)
class MapTarget:
    """One target of a ConceptMap element: ``system|code`` ("" when the map says it has none)
    and the FHIR equivalence of the source to it."""

    target: str
    equivalence: str


@dataclass(frozen=True, kw_only=True)
class ConceptMapDef:
    """A FHIR ConceptMap read from the deployment's ``conceptmaps`` folder
    (``app.ontology.conceptmaps``): each source ``system|code`` with its targets."""

    url: str
    version: str
    name: str
    source: str
    mappings: dict[str, tuple[MapTarget, ...]]


@dataclass(frozen=True, kw_only=True)
class EarlierMember:
    """A code only an earlier expansion of a class's value set lists."""

    class_iri: str
    url: str
    version: str | None  # the current expansion's
    earlier_version: str
    #: set when the code comes from a supplement, not an earlier expansion: how it derives
    derived: str | None = None


@dataclass(frozen=True, kw_only=True)
class MappedCode:
    """A code a deployment's ConceptMap translates to ``target``."""

    target: str
    equivalence: str
    map_url: str
    map_version: str
