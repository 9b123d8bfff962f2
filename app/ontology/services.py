"""CDS services (``horis:CdsService``): their prefetch, the cards and system actions they
declare, and the suggestions a card makes."""

from __future__ import annotations

from dataclasses import dataclass

from app.cds_vocabulary import ActionType, Indicator, SelectionBehavior, SuggestionActionType
from app.ontology.rules import Condition

#: How far past the hook's time a reading may be stamped unless a service says otherwise.
DEFAULT_CLOCK_SKEW = 300.0


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
    drug it replaces); ``horis:dosage`` gives the alternative's own (a FHIR R4 Dosage in JSON),
    so that the order swapped in is complete. ``horis:advice "…"`` in place of a medication: no
    order is named, the suggestion is that advice without action (what to do with the dose,
    say).
    """

    replaces: tuple[str, ...]
    medication: str | None
    display: str | None
    keep_dosage: bool = False
    advice: str | None = None
    #: horis:dosage: the swapped-in order's dosage (a FHIR R4 Dosage, JSON), in place of the
    #: draft's: the order the prescriber accepts is complete
    dosage: str | None = None


@dataclass(frozen=True, kw_only=True)
class SuggestionDecl:
    """``horis:suggest [ horis:label "…" ; horis:actionType "delete" ; horis:cites P ]``, or
    ``horis:suggest [ horis:label "…" ; horis:activity "{…}" … ; horis:when [ … ] ]``.

    The action's resource is the FHIR source of the instance that the decision's proof reaches
    through property ``cites`` (e.g. the draft order a contraindication rule used); in a
    ``horis:forEach`` card without ``cites``, the FHIR source of the card's own instance. The
    label may hold placeholders (``app.ontology.card_text``).
    """

    label: str
    action_type: SuggestionActionType
    cites: str | None = None
    description: str | None = None
    #: horis:alternative: the orders to swap in for the cited draft order, first match wins
    alternatives: tuple[AlternativeDecl, ...] = ()
    #: horis:noAlternative: the label of a suggestion without action for a cited draft order
    #: no alternative replaces (None: no suggestion for it)
    no_alternative: str | None = None
    #: horis:activity…: the requests the suggestion creates (taken together, as one), each as
    #: JSON ``{"activityDefinition": {…}, "dynamicValue": […], "context": {…}}`` — an R4
    #: ActivityDefinition applied for the call's patient when the card is built
    #: (``app.plandefinition.declared``), then the optional further dynamic values, with
    #: ``context`` as their context resource (``app.ontology.activity``)
    activities: tuple[str, ...] = ()
    #: horis:when on the suggestion: conditions on the focus it is offered under (none: always)
    when: tuple[Condition, ...] = ()


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
    selection_behavior: SelectionBehavior | None = None
    order: int = 0
    #: horis:forEach ( path )…: one card per instance reached from the focus (their union)
    for_each: tuple[tuple[str, ...], ...] = ()
    #: horis:where on a horis:forEach card: conditions each instance must satisfy
    each_where: tuple[Condition, ...] = ()
    detail: str | None = None  # horis:detail: Markdown shown before the run's own detail
    #: horis:line: the card as one short line of a combined card (None: its summary)
    line: str | None = None
    #: each placeholder name its texts use (``instance.mme``) → the first property it reads
    variables: tuple[tuple[str, str], ...] = ()
    #: each value placeholder → its steps: (property IRI, filter property IRI or None)
    paths: tuple[tuple[str, tuple[tuple[str, str | None], ...]], ...] = ()
    #: each ``rule.R`` section name → the rule IRI
    rules: tuple[tuple[str, str], ...] = ()
    #: horis:overrideReason on the card: individuals, in place of the service's; None: its
    #: service's
    override_reasons: tuple[str, ...] | None = None
    #: horis:link [ horis:label ; horis:url ]…: (label, absolute http(s) URL) the card links to
    #: after its decision record, in the order declared
    links: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, kw_only=True)
class SystemActionDecl:
    """``horis:systemAction [ horis:when [ … ] | horis:terminal S ; horis:actionType "delete" ;
    horis:description "…" ; horis:cites P ]`` on a CDS service, or one creating a request
    ``[ horis:actionType "create" ; horis:description "…" ; horis:activity "…" ]``.

    Matched like a card (``terminal`` and ``when`` both hold when given) after the run ends; a
    matching declaration yields one CDS Hooks Action in the response's ``systemActions`` per
    resource the decision's proof reaches through ``cites`` (the FHIR source of the cited
    instance, never generated text). ``delete`` carries ``resourceId``; ``update`` carries
    ``resourceId`` and the resource as it was read (the service builds no changed content).
    With ``activity`` (an ActivityDefinition, as on a suggestion): one ``create`` action, the
    request it defines built for the call's patient (``app.plandefinition.declared``).
    """

    action_type: ActionType
    description: str
    cites: str | None = None
    activity: str | None = None  # horis:activity: the request a create builds
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


@dataclass(frozen=True, kw_only=True)
class CombinedServiceDef:
    """``S a horis:CombinedService``: a CDS service answering with the cards of ``members``
    (services of the same hook, by ``horis:id``, in order of importance) combined into one
    card per draft order (``app.cds.combined``)."""

    iri: str
    id: str
    hook: str
    title: str
    description: str
    members: tuple[str, ...]
    #: horis:maxLines: how many other findings a combined card lists under its lead
    max_lines: int = 3
    documentation: str | None = None
    custom_hook: bool = False
