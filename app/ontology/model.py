"""The compiled ontology: frozen values that every other layer reads.

The loader (``app.ontology.loader``) turns Turtle into these objects; nothing else builds them
except tests. Every identifier is a full IRI string; ``name`` is the IRI's local name, used in
JSON (structured input, schemas, outcomes). Turtle terms are given next to each field as
``horis:term`` so this module doubles as the vocabulary reference (docs/vocabulary.md expands it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Literal, TypeAlias, get_args

HORIS = "https://horismos.dev/ns#"
XSD = "http://www.w3.org/2001/XMLSchema#"

#: A literal or an IRI (object values and enumeration individuals are IRI strings).
Value: TypeAlias = Decimal | int | str | bool

Datatype = Literal[
    "xsd:decimal", "xsd:integer", "xsd:string", "xsd:boolean", "xsd:dateTime", "xsd:date"
]
Cardinality = Literal["0..1", "1..1", "0..*", "1..*"]
Resolution = Literal["Reject", "FirstListed"]
Operator = Literal[
    "is",
    "isNot",
    "in",
    "notIn",
    "greaterThan",
    "atLeast",
    "lessThan",
    "atMost",
    "isAssigned",
    "matches",
    "isA",
    "inValueSet",
    "withinPast",
    "atMostAgo",
    "atLeastAgo",
]
OPERATORS: tuple[Operator, ...] = get_args(Operator)
StepKind = Literal[
    "Step",  # a plain terminal step (horis:Step ; horis:terminal true)
    "PerceptionStep",
    "ReasoningStep",
    "ActionStep",
    "NarrationStep",
    "ProposalStep",
    "WaitStep",
    "ChoiceStep",
    "SubflowStep",
]
Pick = Literal["Latest", "All"]
AggregateFunction = Literal["Count", "Sum", "Min", "Max", "DaysCovered"]
#: ``horis:absentMeans``: ``Unknown`` (no value is unknown: a measurement), ``None`` (closed
#: world: an answered search without a match means there is none, for record lists only) or
#: ``Unread`` (a property of a record: a record read without a value for it is *unread*)
AbsentMeans = Literal["None", "Unknown", "Unread"]
Indicator = Literal["info", "warning", "critical"]


def local_name(iri: str) -> str:
    """The part of an IRI after its last ``#`` or ``/``."""
    for sep in ("#", "/"):
        if sep in iri:
            iri = iri.rsplit(sep, 1)[1]
    return iri


_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+[0-9]*|[A-Z]+[0-9]*|[0-9]+")


def humanise(name: str) -> str:
    """A local name as words, for a name without ``rdfs:label``: ``ChestPain`` → ``Chest pain``,
    ``ACEInhibitor`` → ``ACE inhibitor``, ``ehr.assign_queue`` → ``Ehr assign queue``."""
    words = _WORD.findall(local_name(name))
    if not words:
        return name
    out = [w if len(w) > 1 and w.isupper() else w.lower() for w in words]
    out[0] = out[0][:1].upper() + out[0][1:]
    return " ".join(out)


#: How far past the hook's time a reading may be stamped unless a service says otherwise.
DEFAULT_CLOCK_SKEW = 300.0


# --- classes and properties ----------------------------------------------------------------


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


@dataclass(frozen=True, kw_only=True)
class ValueSetDef:
    """A FHIR ValueSet read from the deployment's ``valuesets`` folder (``app.ontology.valuesets``):
    its canonical URL, its members as ``system|code``, and the file it was read from."""

    url: str
    name: str
    codes: frozenset[str]
    source: str
    version: str | None = None


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


@dataclass(frozen=True, kw_only=True)
class MappedCode:
    """A code a deployment's ConceptMap translates to ``target``."""

    target: str
    equivalence: str
    map_url: str
    map_version: str


# --- conditions and rules ------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Condition:
    """One pattern: ``[ horis:property P | horis:path (p1 p2) ; horis:<op> value ]``.

    ``path`` is never empty: ``horis:property P`` compiles to ``path=(P,)``. ``value`` is a
    tuple for ``in``/``notIn``, a bool for ``isAssigned``, a regex for ``matches``, a class IRI
    for ``isA``, a value set's canonical URL for ``inValueSet``, an ISO 8601 duration text for
    the time windows ``withinPast``, ``atMostAgo`` and ``atLeastAgo`` (``app.world.windows``).
    """

    path: tuple[str, ...]
    op: Operator
    value: Value | tuple[Value, ...]
    node: str | None = None  # the blank node or IRI it was read from, for error messages


@dataclass(frozen=True, kw_only=True)
class Conclusion:
    """``horis:then [ horis:property P ; horis:value V ]``."""

    property: str
    value: Value


@dataclass(frozen=True, kw_only=True)
class Rule:
    """``R a horis:Rule ; horis:about C ; horis:when (…) ; horis:then […]``."""

    iri: str
    name: str
    about: str
    when: tuple[Condition, ...]
    then: tuple[Conclusion, ...]
    order: int = 0  # document order among rules, for deterministic evaluation
    label: str | None = None  # rdfs:label: the criterion as a clinician names it


# --- tools ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ToolArg:
    """``horis:arg [ horis:name "queue" ; horis:type :AcuityLevel ]``."""

    name: str
    type: str  # class IRI or xsd datatype IRI


@dataclass(frozen=True, kw_only=True)
class EffectDecl:
    """``horis:asserts [ horis:property P ; horis:value horis:now | horis:type T ]``."""

    property: str
    type: str | None = None  # what the tool must return under the property's local name
    now: bool = False  # horis:value horis:now: filled by the runtime, not the tool


CommitOperation = Literal["update", "patch", "create"]


@dataclass(frozen=True, kw_only=True)
class AdapterCommit:
    """``horis:commits [ … ]`` on a tool: an adapter-mediated write to the FHIR server.

    ``update`` (``horis:Update``) and ``patch`` (``horis:Patch``) change ``element`` of the
    hydrated resource of ``resource_type`` (its version comes from the run's source-version
    vector), set from argument ``value_arg`` translated through the argument value's
    ``horis:code`` in ``code_system``: ``update`` PUTs the whole resource, ``patch`` sends a JSON
    Patch of that one element; both only against the version the run read (``If-Match``).
    ``create`` (``horis:Create``) POSTs a new resource rendered from ``template`` (JSON with
    ``{{…}}`` placeholders), conditionally on its identifier (``If-None-Exist``) so a retry
    never creates it twice. The call is made only when ``fhirAuthorization.scope`` grants
    ``scope``.
    """

    resource_type: str  # horis:resourceType "Encounter"
    element: str = ""  # horis:element "priority" (update, patch)
    value_arg: str = ""  # horis:valueArg "queue" (update, patch)
    code_system: str | None = None  # horis:codeSystem "http://terminology.hl7.org/…"
    operation: CommitOperation = "update"  # horis:operation horis:Update | Patch | Create
    scope: str = ""  # horis:scope "user/Encounter.write"
    template: str | None = None  # horis:template: the JSON body of a create

    @property
    def is_message(self) -> bool:
        """A create of a message between people (a FHIR ``Communication``): the one write an
        undecided run still makes, so that somebody hears of it."""
        return self.operation == "create" and self.resource_type in _MESSAGE_TYPES


#: FHIR resource types that are messages between people, not a record's content
_MESSAGE_TYPES = frozenset({"Communication"})


@dataclass(frozen=True, kw_only=True)
class ToolDef:
    """``T a horis:Tool`` (docs/tools.md)."""

    iri: str
    name: str
    args: tuple[ToolArg, ...]
    effects: tuple[EffectDecl, ...]
    binding: str  # python:… | rust:… | http(s)://… | mcp://server/tool | fhir:commit
    timeout: float = 5.0  # horis:timeout "5s" in seconds
    idempotent: bool = False
    retries: int | None = None  # horis:retries; None = the default (0 when non-idempotent)
    commits: AdapterCommit | None = None
    pure: bool = False  # horis:pure: computes from its arguments only, acts on nothing outside
    label: str | None = None  # rdfs:label


# --- workflows -----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ArgBinding:
    """``horis:bind [ horis:arg "queue" ; horis:property :acuity ]`` or ``… horis:focus true``."""

    arg: str
    property: str | None = None
    focus: bool = False


@dataclass(frozen=True, kw_only=True)
class Branch:
    """One ChoiceStep branch: ``[ horis:when [ … ] ; horis:next S ]``."""

    when: tuple[Condition, ...]
    next: str


@dataclass(frozen=True, kw_only=True)
class CandidateQuery:
    """``horis:candidates [ horis:path (:hasOption) ; horis:where ( … ) ]``.

    Candidates are the values reached from the focus along ``path`` (or, with ``class_iri``,
    every instance of that class) for which every ``where`` condition holds on the candidate.
    """

    path: tuple[str, ...] = ()
    class_iri: str | None = None  # horis:class
    where: tuple[Condition, ...] = ()


@dataclass(frozen=True, kw_only=True)
class SubflowOutcome:
    """``horis:outcome [ horis:terminal :SubDone ; horis:next :ParentStep ]``."""

    terminal: str
    next: str


@dataclass(frozen=True, kw_only=True)
class StepDef:
    """One workflow step. Fields not used by ``kind`` keep their defaults."""

    iri: str
    name: str
    kind: StepKind
    terminal: bool = False
    next: str | None = None
    requires: tuple[Condition, ...] = ()
    on_unsatisfied: str | None = None
    # PerceptionStep
    extracts: tuple[str, ...] = ()
    model: str | None = None
    confidence: float | None = None
    fallback: str | None = None  # PerceptionStep, ProposalStep
    retries: int | None = None  # PerceptionStep (default 2), ActionStep (tool's default)
    # ReasoningStep
    goal: tuple[Condition, ...] = ()
    on_unreachable: str | None = None
    on_incomplete: str | None = None  # horis:onIncomplete (falls back to on_unreachable)
    # ActionStep
    tool: str | None = None
    bindings: tuple[ArgBinding, ...] = ()
    on_error: str | None = None
    #: horis:forEach ( path )…: one call per instance reached from the focus (their union)
    for_each: tuple[tuple[str, ...], ...] = ()
    #: horis:where on a horis:forEach step: conditions each instance must satisfy
    each_where: tuple[Condition, ...] = ()
    # NarrationStep
    narrates: str | None = None  # horis:narrates [ horis:property P ]
    audience: str | None = None
    style: str | None = None
    required: bool = False
    # ProposalStep
    candidates: CandidateQuery | None = None
    rank_by: str | None = None
    selects: str | None = None  # horis:selects P: the focus property that receives the choice
    # WaitStep
    awaits: tuple[str, ...] = ()  # horis:awaits P (properties the resume must bring)
    timeout: float | None = None  # seconds (horis:timeout "PT4H" or "30s")
    on_timeout: str | None = None
    # ChoiceStep
    branches: tuple[Branch, ...] = ()
    otherwise: str | None = None  # also SubflowStep: when no outcome matches
    # SubflowStep
    workflow: str | None = None
    outcomes: tuple[SubflowOutcome, ...] = ()
    label: str | None = None  # rdfs:label: what a clinician calls the step

    def edges(self) -> tuple[str, ...]:
        """Every step this one can move to, in a stable order."""
        out = [
            self.next,
            self.on_unsatisfied,
            self.fallback,
            self.on_unreachable,
            self.on_incomplete,
            self.on_error,
            self.on_timeout,
            *(b.next for b in self.branches),
            self.otherwise,
            *(o.next for o in self.outcomes),
        ]
        return tuple(dict.fromkeys(e for e in out if e is not None))


@dataclass(frozen=True, kw_only=True)
class WorkflowDef:
    """``W a horis:Workflow``."""

    iri: str
    name: str
    starts_at: str
    steps: dict[str, StepDef] = field(default_factory=dict)  # every step reachable from start
    decides: str | None = None
    focus: str | None = None
    version: str = "0"


# --- CDS services --------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class PrefetchTemplate:
    """``horis:prefetch [ horis:key "vitals" ; horis:query "Observation?patient={{…}}" ]``."""

    key: str
    query: str


@dataclass(frozen=True, kw_only=True)
class TextSource:
    """``horis:text [ horis:resourceType "Encounter" ; horis:fhirPath "reasonCode.text" ]``:
    where the run's free text (PerceptionStep input) comes from."""

    resource_type: str
    fhir_path: str


@dataclass(frozen=True, kw_only=True)
class AlternativeDecl:
    """``horis:alternative [ horis:replaces "system|code" … ; horis:medication "system|code" ;
    horis:display "…" ; horis:keepDosage false ]`` on a suggestion.

    A cited draft order whose drug is coded with one of ``replaces`` gets, as the suggestion's
    action, the same order with ``medication`` (and its display) in place of its drug; its
    dosage and dispensed quantity are kept only with ``keep_dosage`` (they were written for the
    drug it replaces). ``horis:advice "…"`` in place of a medication: no order is named, the
    suggestion is that advice without action (what to do with the dose, say).
    """

    replaces: tuple[str, ...]
    medication: str | None
    display: str | None
    keep_dosage: bool = False
    advice: str | None = None


@dataclass(frozen=True, kw_only=True)
class SuggestionDecl:
    """``horis:suggest [ horis:label "…" ; horis:actionType "delete" ; horis:cites P ]``.

    The action's resource is the FHIR source of the instance that the decision's proof reaches
    through property ``cites`` (e.g. the draft order a contraindication rule used); in a
    ``horis:forEach`` card without ``cites``, the FHIR source of the card's own instance. The
    label may hold placeholders (``app.ontology.card_text``).
    """

    label: str
    action_type: Literal["create", "update", "delete"]
    cites: str | None = None
    description: str | None = None
    #: horis:alternative: the orders to swap in for the cited draft order, first match wins
    alternatives: tuple[AlternativeDecl, ...] = ()
    #: horis:noAlternative: the label of a suggestion without action for a cited draft order
    #: no alternative replaces (None: no suggestion for it)
    no_alternative: str | None = None


@dataclass(frozen=True, kw_only=True)
class CardDecl:
    """``horis:card [ horis:when [ … ] | horis:terminal S ; horis:indicator "critical" ;
    horis:summary "…" ; horis:suggest […] ; horis:selectionBehavior "at-most-one" ]``.

    Cards are tried in document order; every matching one is emitted. ``when`` is evaluated on
    the run's focus after the run ends; ``terminal`` matches the terminal step that ended it.
    With ``for_each`` a matching declaration yields one card per instance it selects.
    """

    indicator: Indicator
    summary: str  # may hold placeholders (``app.ontology.card_text``), as may ``detail``
    when: tuple[Condition, ...] = ()
    terminal: str | None = None
    suggestions: tuple[SuggestionDecl, ...] = ()
    selection_behavior: Literal["at-most-one", "any"] | None = None
    order: int = 0
    #: horis:forEach ( path )…: one card per instance reached from the focus (their union)
    for_each: tuple[tuple[str, ...], ...] = ()
    #: horis:where on a horis:forEach card: conditions each instance must satisfy
    each_where: tuple[Condition, ...] = ()
    detail: str | None = None  # horis:detail: Markdown shown before the run's own detail
    #: each placeholder name its texts use (``instance.mme``) → the first property it reads
    variables: tuple[tuple[str, str], ...] = ()
    #: each value placeholder → its steps: (property IRI, filter property IRI or None)
    paths: tuple[tuple[str, tuple[tuple[str, str | None], ...]], ...] = ()
    #: each ``rule.R`` section name → the rule IRI
    rules: tuple[tuple[str, str], ...] = ()
    #: horis:overrideReason on the card: individuals, in place of the service's; None: its
    #: service's
    override_reasons: tuple[str, ...] | None = None


@dataclass(frozen=True, kw_only=True)
class SystemActionDecl:
    """``horis:systemAction [ horis:when [ … ] | horis:terminal S ; horis:actionType "delete" ;
    horis:description "…" ; horis:cites P ]`` on a CDS service.

    Matched like a card (``terminal`` and ``when`` both hold when given) after the run ends; a
    matching declaration yields one CDS Hooks Action in the response's ``systemActions`` per
    resource the decision's proof reaches through ``cites`` (the FHIR source of the cited
    instance, never generated text). ``delete`` carries ``resourceId``; ``update`` carries
    ``resourceId`` and the resource as it was read (the service builds no changed content).
    """

    action_type: Literal["create", "update", "delete"]
    description: str
    cites: str | None = None
    when: tuple[Condition, ...] = ()
    terminal: str | None = None
    order: int = 0


@dataclass(frozen=True, kw_only=True)
class CdsServiceDef:
    """``S a horis:CdsService``."""

    iri: str
    id: str
    hook: str
    title: str
    description: str
    workflow: str
    prefetch: tuple[PrefetchTemplate, ...] = ()
    usage_requirements: str | None = None
    text: tuple[TextSource, ...] = ()
    cards: tuple[CardDecl, ...] = ()
    system_actions: tuple[SystemActionDecl, ...] = ()  # horis:systemAction [ … ]…
    custom_hook: bool = False  # horis:customHook true: not a hook of the CDS Hooks registry
    #: horis:clockSkew "PT5M" in seconds: how far past the hook's time a reading may be stamped
    #: (the EHR's clocks and ours differ) before it is refused as taken in the future
    clock_skew: float = DEFAULT_CLOCK_SKEW
    #: horis:overrideReason: the individuals every card offers as override reasons, in order
    override_reasons: tuple[str, ...] = ()
    documentation: str | None = None  # horis:documentation: the page a card's source.url names
    #: horis:topic: (system, code, display) of the cards' coded topic (``source.topic``)
    topic: tuple[str, str, str] | None = None
    answered_ahead: bool = False  # horis:answeredAhead: computed at order-select (app.cds.ahead)

    def reasons_for(self, card: CardDecl) -> tuple[str, ...]:
        """The override reasons ``card`` offers: its own, else the service's."""
        return self.override_reasons if card.override_reasons is None else card.override_reasons


# --- the whole ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class OntologyPart:
    """One ``owl:Ontology`` among the files loaded together (a deployment and each file it
    imports): its IRI, ``owl:versionInfo``, the digest of its own files' triples, its files."""

    iri: str
    version: str | None
    digest: str
    files: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Ontology:
    """Everything loaded from one or more Turtle files, checked and indexed."""

    namespace: str  # the deployment namespace local names resolve against (first file's base)
    version: str  # owl:versionInfo of the ontology, else a content digest
    digest: str  # sha256 of the canonical Turtle: identifies exactly what a run ran against
    classes: dict[str, ClassDef]
    individuals: dict[str, Individual]
    properties: dict[str, PropertyDef]
    rules: tuple[Rule, ...]
    tools: dict[str, ToolDef]
    workflows: dict[str, WorkflowDef]
    services: dict[str, CdsServiceDef]
    sources: tuple[str, ...] = ()  # the files it was loaded from
    namespaces: tuple[str, ...] = ()  # every deployment file's default namespace, in load order
    unreachable_steps: tuple[str, ...] = ()  # declared steps no workflow's start reaches
    #: FHIR value sets by canonical URL, read from the ``valuesets`` folders beside the files
    value_sets: dict[str, ValueSetDef] = field(default_factory=dict)
    #: earlier expansions of those value sets (``valuesets/history``), by canonical URL
    value_set_history: dict[str, tuple[ValueSetDef, ...]] = field(default_factory=dict)
    #: FHIR concept maps by canonical URL, read from the ``conceptmaps`` folders beside the files
    concept_maps: dict[str, ConceptMapDef] = field(default_factory=dict)
    #: each ``owl:Ontology`` loaded (a file without one is a part named by its file URI), in
    #: load order: the deployment's own first, then what it imports
    parts: tuple[OntologyPart, ...] = ()
    #: the file each named node was first read from (relative to the first file's folder), so
    #: a problem about a node of an imported file names that file
    origins: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    _index: _Index = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", _Index.build(self))

    # --- lookups ---------------------------------------------------------------------------

    def resolve(self, name: str, *, namespace: str | None = None) -> str:
        """A local name or IRI → the IRI of a declared node.

        A full IRI must be declared. A local name resolves to ``namespace + name`` when that is
        declared, else to the one declared node with that local name; a local name declared in
        several namespaces is ambiguous (``KeyError``) unless ``namespace`` picks one.
        """
        known = self._index.names
        if name in self._index.all_iris:
            return name
        if namespace is not None and namespace + name in self._index.all_iris:
            return namespace + name
        candidates = known.get(name, ())
        if len(candidates) == 1:
            return candidates[0]
        if not candidates:
            raise KeyError(f"{name!r} is not declared in the ontology")
        raise KeyError(f"{name!r} is ambiguous: {', '.join(candidates)}; use the full IRI")

    def namespace_of(self, iri: str) -> str:
        """The namespace part of an IRI (everything up to the local name)."""
        return iri[: len(iri) - len(local_name(iri))]

    def is_subclass(self, c: str, ancestor: str) -> bool:
        """Whether ``c`` is ``ancestor`` or below it (reflexive, transitive)."""
        return ancestor in self._index.ancestors.get(c, (c,))

    def ancestors(self, c: str) -> tuple[str, ...]:
        """``c`` and every class above it, nearest first."""
        return self._index.ancestors.get(c, (c,))

    def subclasses(self, c: str) -> tuple[str, ...]:
        """The closed tree under ``c``, ``c`` included, in a stable (pre-order) order."""
        return self._index.subtree.get(c, (c,))

    def class_for_code(self, coding: str) -> str | None:
        """The class whose ``horis:code`` is ``"system|code"``, else the most specific class
        with a ``horis:inValueSet`` that has it as a member, if any."""
        found = self._index.class_codes.get(coding)
        if found is not None:
            return found
        best: str | None = None
        for iri, codes in self._index.value_set_classes:
            if coding in codes and (best is None or self.is_subclass(iri, best)):
                best = iri
        return best

    def earlier_members(self, coding: str) -> tuple[EarlierMember, ...]:
        """The classes ``"system|code"`` belongs to only through an earlier expansion of one of
        their value sets (none when a current expansion or a class's own code lists it)."""
        return self._index.earlier.get(coding, ())

    def earlier_expansions(self, coding: str) -> tuple[EarlierMember, ...]:
        """The value sets only an earlier expansion of which lists ``"system|code"`` (each an
        ``EarlierMember`` with an empty ``class_iri``): what ``horis:inValueSet`` conditions
        and mapping filters count too, with a note."""
        return self._index.earlier_any.get(coding, ())

    def translations(self, coding: str) -> tuple[MappedCode, ...]:
        """What the deployment's concept maps translate ``"system|code"`` to."""
        return self._index.mapped.get(coding, ())

    def knows_code(self, coding: str) -> bool:
        """Whether ``"system|code"`` is named anywhere in the deployment (a class's or an
        individual's code, a value set member, a mapping's coding)."""
        return coding in self._index.known_codes

    def names_system(self, system: str) -> bool:
        """Whether any code the deployment names is of code system ``system``."""
        return system in self._index.code_systems

    def conditions_on(self, property_iri: str) -> tuple[Condition, ...]:
        """The conditions (rules, steps, cards) that compare a value of ``property_iri``."""
        return self._index.conditions_on.get(property_iri, ())

    def in_value_set(self, coding: str, canonical: str, *, earlier: bool = False) -> bool:
        """Whether ``"system|code"`` is a member of the value set ``canonical`` (with
        ``earlier``, of its current expansion or of an earlier one)."""
        vs = self.value_sets.get(canonical)
        if vs is not None and coding in vs.codes:
            return True
        return earlier and any(m.url == canonical for m in self.earlier_expansions(coding))

    def individual_for_code(self, coding: str) -> str | None:
        """The enumeration individual whose ``horis:code`` is ``"system|code"``, if any."""
        return self._index.individual_codes.get(coding)

    def class_of(self, iri: str) -> str | None:
        """The class of a named individual."""
        ind = self.individuals.get(iri)
        return ind.class_iri if ind else None

    def workflow(self, name_or_iri: str) -> WorkflowDef:
        """A workflow by IRI or local name (``KeyError`` if unknown or ambiguous)."""
        if name_or_iri in self.workflows:
            return self.workflows[name_or_iri]
        matches = [w for w in self.workflows.values() if w.name == name_or_iri]
        if len(matches) == 1:
            return matches[0]
        raise KeyError(f"workflow {name_or_iri!r} is {'ambiguous' if matches else 'not declared'}")

    def step(self, iri: str) -> StepDef:
        """A step of any workflow by IRI."""
        return self._index.steps[iri]

    def service(self, id: str) -> CdsServiceDef:
        """A CDS service by its ``horis:id`` (or IRI)."""
        for s in self.services.values():
            if s.id == id or s.iri == id:
                return s
        raise KeyError(f"CDS service {id!r} is not declared")

    def rules_for(self, property_iri: str) -> tuple[Rule, ...]:
        """The rules concluding ``property_iri``, in document order."""
        return self._index.rules_by_property.get(property_iri, ())

    def properties_of(self, class_iri: str) -> tuple[PropertyDef, ...]:
        """Properties an instance of ``class_iri`` may carry (domain is the class or above)."""
        ancestors = set(self.ancestors(class_iri))
        return tuple(p for p in self.properties.values() if p.domain in ancestors)


def _conditions_by_property(
    o: Ontology, steps: Mapping[str, StepDef]
) -> dict[str, tuple[Condition, ...]]:
    """Every condition of the rules, steps (goals, requirements, branches) and cards, by the
    property its path ends at: what a value of that property is compared with."""
    found: dict[str, list[Condition]] = {}
    groups: list[Iterable[Condition]] = [r.when for r in o.rules]
    for s in steps.values():
        groups.extend((s.goal, s.requires))
        groups.extend(b.when for b in s.branches)
    for svc in o.services.values():
        groups.extend(c.when for c in svc.cards)
    groups.extend(p.aggregate.where for p in o.properties.values() if p.aggregate is not None)
    for group in groups:
        for c in group:
            found.setdefault(c.path[-1], []).append(c)
    return {k: tuple(v) for k, v in found.items()}


@dataclass(frozen=True)
class _Index:
    """Lookup tables computed once from an Ontology's fields."""

    names: dict[str, tuple[str, ...]]
    all_iris: frozenset[str]
    ancestors: dict[str, tuple[str, ...]]
    subtree: dict[str, tuple[str, ...]]
    class_codes: dict[str, str]
    individual_codes: dict[str, str]
    steps: dict[str, StepDef]
    rules_by_property: dict[str, tuple[Rule, ...]]
    #: (class IRI, member codes) of every class with ``horis:inValueSet``, in document order
    value_set_classes: tuple[tuple[str, frozenset[str]], ...] = ()
    #: every "system|code" the deployment names: class and individual codes, value set members,
    #: mapping codings
    known_codes: frozenset[str] = frozenset()
    #: codes only earlier expansions of classes' value sets list → those classes
    earlier: dict[str, tuple[EarlierMember, ...]] = field(default_factory=dict)
    #: codes only earlier expansions of any value set list → those value sets
    earlier_any: dict[str, tuple[EarlierMember, ...]] = field(default_factory=dict)
    #: source codes of the deployment's concept maps → their targets
    mapped: dict[str, tuple[MappedCode, ...]] = field(default_factory=dict)
    #: the code systems of ``known_codes``
    code_systems: frozenset[str] = frozenset()
    #: property IRI → the conditions anywhere in the deployment whose path ends at it
    conditions_on: dict[str, tuple[Condition, ...]] = field(default_factory=dict)
    #: derived JSON Schemas by extracted classes (filled by ``app.ontology.schema``)
    schemas: dict[tuple[str, ...], dict[str, object]] = field(default_factory=dict)

    @staticmethod
    def build(o: Ontology) -> _Index:
        steps = {iri: s for w in o.workflows.values() for iri, s in w.steps.items()}
        iris: list[str] = [
            *o.classes,
            *o.individuals,
            *o.properties,
            *(r.iri for r in o.rules),
            *o.tools,
            *o.workflows,
            *steps,
            *o.services,
        ]
        names: dict[str, list[str]] = {}
        for iri in dict.fromkeys(iris):
            names.setdefault(local_name(iri), []).append(iri)
        ancestors: dict[str, tuple[str, ...]] = {}

        def up(c: str, trail: tuple[str, ...]) -> tuple[str, ...]:
            if c in ancestors:
                return ancestors[c]
            out = [c]
            cls = o.classes.get(c)
            for parent in cls.parents if cls else ():
                if parent not in trail:
                    out.extend(a for a in up(parent, (*trail, c)) if a not in out)
            ancestors[c] = tuple(out)
            return ancestors[c]

        children: dict[str, list[str]] = {}
        for c in o.classes.values():
            up(c.iri, ())
            for parent in c.parents:
                children.setdefault(parent, []).append(c.iri)
        subtree: dict[str, tuple[str, ...]] = {}
        for root in o.classes:
            order: list[str] = []
            stack = [root]
            while stack:
                n = stack.pop()
                if n in order:
                    continue
                order.append(n)
                stack.extend(reversed(children.get(n, [])))
            subtree[root] = tuple(order)
        by_prop: dict[str, list[Rule]] = {}
        for r in o.rules:
            for prop in dict.fromkeys(t.property for t in r.then):
                by_prop.setdefault(prop, []).append(r)
        known = frozenset(
            {
                *(code for c in o.classes.values() for code in c.codes),
                *(code for i in o.individuals.values() for code in i.codes),
                *(code for vs in o.value_sets.values() for code in vs.codes),
                *(code for p in o.properties.values() for m in p.from_fhir for code in m.codings),
            }
        )
        earlier: dict[str, list[EarlierMember]] = {}
        class_codes = {code: c.iri for c in o.classes.values() for code in c.codes}
        for c in o.classes.values():
            for url in c.value_sets:
                current = o.value_sets.get(url)
                for old in o.value_set_history.get(url, ()) if current is not None else ():
                    assert current is not None and old.version is not None
                    for code in old.codes - current.codes:
                        if code in class_codes:
                            continue
                        earlier.setdefault(code, []).append(
                            EarlierMember(
                                class_iri=c.iri,
                                url=url,
                                version=current.version,
                                earlier_version=old.version,
                            )
                        )
        earlier_any: dict[str, list[EarlierMember]] = {}
        for url, olds in o.value_set_history.items():
            current = o.value_sets.get(url)
            for old in olds if current is not None else ():
                assert current is not None and old.version is not None
                for code in old.codes - current.codes:
                    earlier_any.setdefault(code, []).append(
                        EarlierMember(
                            class_iri="",
                            url=url,
                            version=current.version,
                            earlier_version=old.version,
                        )
                    )
        mapped: dict[str, list[MappedCode]] = {}
        for cm in o.concept_maps.values():
            for source, targets in cm.mappings.items():
                mapped.setdefault(source, []).extend(
                    MappedCode(
                        target=t.target,
                        equivalence=t.equivalence,
                        map_url=cm.url,
                        map_version=cm.version,
                    )
                    for t in targets
                    if t.target
                )
        return _Index(
            earlier={k: tuple(v) for k, v in earlier.items()},
            earlier_any={k: tuple(v) for k, v in earlier_any.items()},
            mapped={k: tuple(v) for k, v in mapped.items()},
            known_codes=known,
            code_systems=frozenset(code.split("|", 1)[0] for code in known),
            conditions_on=_conditions_by_property(o, steps),
            names={k: tuple(v) for k, v in names.items()},
            all_iris=frozenset(iris),
            ancestors=ancestors,
            subtree=subtree,
            class_codes={code: c.iri for c in o.classes.values() for code in c.codes},
            individual_codes={code: i.iri for i in o.individuals.values() for code in i.codes},
            steps=steps,
            rules_by_property={k: tuple(v) for k, v in by_prop.items()},
            value_set_classes=tuple(
                (c.iri, frozenset().union(*(o.value_sets[u].codes for u in c.value_sets)))
                for c in o.classes.values()
                if c.value_sets and all(u in o.value_sets for u in c.value_sets)
            ),
        )
