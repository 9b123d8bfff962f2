"""Cards from a finished run, as the service's ``horis:card`` declarations say.

A declaration matches when its ``horis:terminal`` (if any) is the step that ended the run and its
``horis:when`` conditions (if any) hold on the focus afterwards; every matching declaration, in
document order, becomes one card. The detail is CommonMark for a clinician
(``app.clinical_text``): why the run ended where it did when it left its main path, the generated
narration if a language model wrote one, the proof of the decided property as a nested list of
labelled statements (values with their units, data with its source and date), or, for a run that
ended without a decision, which inputs the deciding rules would have read but had no value; then
the writes to the EHR that were possible and did not succeed, and the refused inputs.

A suggestion's resource comes from the graph: the premises of the decision's own justifications
reached through the cited property, mapped back to the FHIR resource each instance was read from,
never from generated text. The service's ``horis:systemAction`` declarations cite resources the
same way (``app.cds.system_actions``). A suggestion with ``horis:alternative`` carries the cited
draft order with the declared alternative swapped in (``app.cds.suggestions``).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Any

from app.cds.card_parts import (
    CARD_EXTENSION,
    RUN_LINK_LABEL,
    SUMMARY_LIMIT,
    about,
    override_reasons,
    source,
)
from app.cds.suggestions import alternative_actions, alternative_for, drug_codes, order_name
from app.clinical_text import deciding_facts, proof_rules
from app.ontology import card_text
from app.ontology.card_text import markdown_escape
from app.ontology.model import (
    CardDecl,
    CdsServiceDef,
    Condition,
    Ontology,
    SuggestionDecl,
    SystemActionDecl,
    WorkflowDef,
    humanise,
    local_name,
)
from app.plandefinition.declared import created_request
from app.runtime.documents import Undecided
from app.world.facts import Violation
from app.world.world import World

DETAIL_LIMIT = 8000


@dataclass(frozen=True, kw_only=True)
class RunView:
    """What the card builder needs from a finished run."""

    run_id: str
    terminal: str | None  # local name of the terminal step
    decided: bool
    #: the run's ``undecided`` outcome: the incomplete inputs that could change the decision
    undecided: Undecided | None = None
    narration: str | None  # written by a language model (never the proof rendered as text)
    focus_id: str
    violations: Sequence[Violation] = ()
    failed_actions: Sequence[str] = ()  # one sentence per tool call that did not succeed
    notices: Sequence[str] = ()  # one sentence per EHR write that was possible and did not succeed
    #: one sentence per step that left the main path along a failure edge, and why
    detours: Sequence[str] = ()
    #: the FHIR resources the call read (prefetch and context), by ``Type/id``
    resources: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: the time zone the card's dates are shown in
    zone: tzinfo = UTC
    #: the run's proof of the decided property (``Outcome.proof``), reused rather than rebuilt
    proof: Mapping[str, Any] | None = None
    #: ``Type/id`` of the draft orders the hook's context carries
    drafts: frozenset[str] = frozenset()
    #: what a suggestion's ActivityDefinition reads as ``%subject``, ``%practitioner`` and
    #: ``%encounter`` (``app.plandefinition.declared.call_refs``)
    refs: Mapping[str, str | None] = field(default_factory=dict)
    #: the run's time (a request a suggestion creates is built at it)
    now: datetime | None = None


class ProofCache:
    """The proofs one response reads, each built once: the run's own proof of the decided
    property (``Outcome.proof``) is reused, and any other the cards name (``because.P``, a
    section on a rule) is built on first use."""

    def __init__(
        self, world: World, focus_id: str, decides: str | None, proof: Mapping[str, Any] | None
    ) -> None:
        self._world, self._focus = world, focus_id
        self._built: dict[str, Mapping[str, Any]] = {}
        self._rules: dict[str, set[str]] = {}
        if decides is not None and proof is not None:
            self._built[decides] = proof

    def of(self, prop: str) -> Mapping[str, Any]:
        """The proof (its JSON) of the focus's ``prop``."""
        if prop not in self._built:
            self._built[prop] = self._world.proof(self._focus, prop).to_json()
        return self._built[prop]

    def rules(self, prop: str) -> set[str]:
        """Every rule the proof of ``prop`` names as a criterion met."""
        if prop not in self._rules:
            self._rules[prop] = set(proof_rules(self.of(prop)))
        return self._rules[prop]


def _label(ontology: Ontology, iri: str) -> str:
    for table in (ontology.properties, ontology.classes, ontology.individuals):
        node = table.get(iri)
        if node is not None:
            return getattr(node, "label", None) or humanise(node.name)
    return humanise(local_name(iri))


def matches(decl: CardDecl | SystemActionDecl, world: World, run: RunView) -> bool:
    if decl.terminal is not None and local_name(decl.terminal) != run.terminal:
        return False
    return not decl.when or world.holds(run.focus_id, decl.when)


def missing_inputs(ontology: Ontology, world: World, decides: str, focus_id: str) -> list[str]:
    """Labels of the properties the deciding rules read first from the focus that had no value."""
    seen: dict[str, None] = {}
    for rule in ontology.rules_for(decides):
        for cond in rule.when:
            if cond.op == "isAssigned" and cond.value is False:
                continue
            first = cond.path[0]
            if first != decides and not world.values(focus_id, first):
                seen.setdefault(first, None)
    return [_label(ontology, p) for p in seen]


#: how many of a list (inputs not used, refused inputs) a card names; the rest are on the record
CARD_LIST_LIMIT = 3
#: the longest one sentence of the run (a detour, a notice) a card shows
SENTENCE_LIMIT = 300
#: the longest account of one input not used a card shows (the whole one is on the record)
INPUT_LIMIT = 160


def _more(count: int) -> str:
    return f"and {count} more on the decision record"


def _detail(ontology: Ontology, workflow: WorkflowDef, world: World, run: RunView) -> str:
    """The run's part of every card: what was not decided and why, or (a card without a
    template of its own) what decided it; then the writes that failed and the refused inputs.
    Short: the whole proof stays on the decision record behind the card's link."""
    parts: list[str] = []
    if run.undecided is None:
        parts.extend(markdown_escape(card_text.shorten(d, SENTENCE_LIMIT)) for d in run.detours)
    if run.undecided is not None:
        parts.append("")  # the undecided block, sized below to what the rest leaves
    elif run.decided and workflow.decides is not None:
        if run.narration:
            parts.append(markdown_escape(card_text.shorten(run.narration, SENTENCE_LIMIT)))
    elif workflow.decides is not None:
        missing = missing_inputs(ontology, world, workflow.decides, run.focus_id)
        what = _label(ontology, workflow.decides)
        if missing:
            named = ", ".join(missing[:CARD_LIST_LIMIT])
            if len(missing) > CARD_LIST_LIMIT:
                named += f", {_more(len(missing) - CARD_LIST_LIMIT)}"
            parts.append(markdown_escape(f"No {what} was decided. Missing data: {named}."))
        else:
            parts.append(markdown_escape(f"No {what} was decided from the data available."))
    parts.extend(markdown_escape(card_text.shorten(n, SENTENCE_LIMIT)) for n in run.notices)
    parts.extend(markdown_escape(card_text.shorten(f, SENTENCE_LIMIT)) for f in run.failed_actions)
    refused = [f"Refused input ({v.code}): {v.message}" for v in run.violations]
    if len(refused) > CARD_LIST_LIMIT - 1:
        rest = len(refused) - (CARD_LIST_LIMIT - 1)
        refused = [*refused[: CARD_LIST_LIMIT - 1], f"{rest} more refused inputs: see the record"]
    parts.extend(markdown_escape(card_text.shorten(r, SENTENCE_LIMIT)) for r in refused)
    if run.undecided is not None:
        rest = sum(len(p) + 2 for p in parts)
        for limit in range(CARD_LIST_LIMIT, 0, -1):
            parts[0] = undecided_markdown(run.undecided, limit)
            if rest + len(parts[0]) <= card_text.DETAIL_MAX_CHARS:
                break
    return "\n\n".join(p for p in parts if p)


def _deciding(
    ontology: Ontology, workflow: WorkflowDef, world: World, run: RunView, proofs: ProofCache
) -> str:
    """For a decided card without a ``horis:detail``: the decision in bold and what decided it
    (the criterion and up to three of its data)."""
    if not run.decided or run.undecided is not None or workflow.decides is None:
        return ""
    facts = deciding_facts(proofs.of(workflow.decides), run.zone)
    value = world.value(run.focus_id, workflow.decides)
    if value is None:
        return ""
    what = _label(ontology, workflow.decides)
    shown = card_text.show((value,), lambda iri: _label(ontology, iri))
    head = f"**{markdown_escape(what[:1].upper() + what[1:])}: {markdown_escape(shown)}**"
    return f"{head} — {markdown_escape(facts)}" if facts else head


def undecided_markdown(undecided: Undecided, limit: int = CARD_LIST_LIMIT) -> str:
    """What a clinician reads when a decision was not made because inputs were incomplete: that
    it was not decided (with the value the rules held on the rest of the data, said not to be a
    decision), then up to ``limit`` (three) of the inputs and why each is not complete
    (hydration's words), "and N more on the decision record" beyond that. What each input could
    have changed is on the decision record. The labels are the run's own (``Outcome.undecided``)."""
    what = str(undecided.propertyLabel or "decision")
    opening = f"**{markdown_escape(what[:1].upper() + what[1:])} not decided**"
    held = undecided.heldLabel
    rest = (
        f" (on the rest of the data the rules give {held}, which is not a decision)"
        if held is not None
        else ""
    )
    lines = [
        f"{opening}: {markdown_escape(f'data it depends on is missing or was not used{rest}.')}"
    ]
    inputs = undecided.inputs
    for item in inputs[:limit]:
        said = "; ".join(r.detail for r in item.reasons if r.detail) or (
            f"No {item.label} could be used"
        )
        lines.append(f"- {markdown_escape(card_text.shorten(said, INPUT_LIMIT))}")
    if len(inputs) > limit:
        lines.append(f"- {_more(len(inputs) - limit)}")
    return "\n".join(lines)


def cited_resources(world: World, workflow: WorkflowDef, focus_id: str, cites: str) -> list[str]:
    """``Type/id`` of every instance the decision's justifications reach through ``cites``:
    for each justifying rule, every value of ``cites`` its conditions accept (two
    contraindicated orders are both cited, though the rule fired on one witness)."""
    if workflow.decides is None:
        return []
    value = world.value(focus_id, workflow.decides)
    if value is None:
        return []
    fact = world.fact(focus_id, workflow.decides, value)
    if fact is None:
        return []
    rules = {r.iri: r for r in world.ontology.rules}
    refs: dict[str, None] = {}
    for just in fact.justifications:
        targets = [t for _s, prop, t in just.premises if prop == cites]
        rule = rules.get(just.rule)
        if rule is not None and any(c.path[0] == cites for c in rule.when):
            # every value the rule's conditions accept, not only the witness it recorded
            targets = list(world.witnesses(focus_id, cites, rule.when))
        for target in targets:
            instance = world.instance(target) if isinstance(target, str) else None
            if instance is not None and instance.source is not None:
                refs.setdefault(instance.source.reference, None)
    return list(refs)


def cited_action(
    action_type: str, description: str, ref: str, resources: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any] | None:
    """A CDS Hooks Action on the cited resource ``ref``, or None when none can be built.

    ``delete``: ``resourceId``. ``update``: ``resourceId`` and the resource as the call read it
    (the service computes no changed content; without the body in hand there is no action).
    ``create`` needs a new resource, which no declaration provides.
    """
    action: dict[str, Any] = {"type": action_type, "description": description, "resourceId": ref}
    if action_type == "delete":
        return action
    if action_type == "update" and ref in resources:
        action["resource"] = dict(resources[ref])
        return action
    return None


def created_for(activity: str, run: RunView) -> tuple[dict[str, Any] | None, str | None]:
    """The request the ``horis:activity`` literal defines, built for this run's call (its
    patient, user, encounter, what it carried, its time), or None and why it cannot be."""
    return created_request(activity, refs=run.refs, resources=run.resources, now=run.now)


def _unknown(world: World, focus_id: str, when: Sequence[Condition]) -> bool:
    """Whether a condition of ``when`` reads a property the focus has no value of."""
    return any(world.value(focus_id, c.path[0]) is None for c in when)


def _suggestions(
    decl: SuggestionDecl,
    world: World,
    workflow: WorkflowDef,
    run: RunView,
    fill: Callable[[str], str],
    instance: str | None,
    notes: list[str],
) -> list[dict[str, Any]]:
    """The suggestions ``decl`` makes on this card; ``notes`` gets a sentence for each one it
    could have made and did not (its conditions unknown, its request not buildable)."""
    label = fill(decl.label)
    if decl.when and not world.holds(run.focus_id, decl.when):
        if _unknown(world, run.focus_id, decl.when):
            notes.append(f"Not offered, not checked: {label} (the record lacks what it reads).")
        return []
    if decl.action_type == "none":  # acknowledged: it changes no record
        return [{"label": label, "uuid": str(uuid.uuid4())}]
    if decl.activities:
        actions = []
        for text in decl.activities:  # taken together: one that cannot be built, none offered
            made, why = created_for(text, run)
            if made is None:
                notes.append(f"Not offered: {label} (its request could not be built: {why}).")
                return []
            description = decl.description or label
            actions.append({"type": "create", "description": description, "resource": made})
        return [{"label": label, "uuid": str(uuid.uuid4()), "actions": actions}]
    if decl.cites is None:
        # in a horis:forEach card: the card's own instance, read from its resource
        found = world.instance(instance) if instance is not None else None
        if found is None or found.source is None:
            return []
        refs = [found.source.reference]
    else:
        refs = cited_resources(world, workflow, run.focus_id, decl.cites)
    if decl.alternatives:
        return [
            s
            for ref in refs
            if (s := _alternative(decl, ref, run, label, fill, several=len(refs) > 1)) is not None
        ]
    out = []
    for ref in refs:
        action = cited_action(decl.action_type, decl.description or label, ref, run.resources)
        if action is None:
            continue
        # a button names the order by its drug, as the prescriber wrote it, never by its id
        order = run.resources.get(ref)
        named = order_name(order) if order is not None else None
        shown = label if decl.cites is None or len(refs) == 1 else f"{label} ({named or ref})"
        out.append({"label": shown, "uuid": str(uuid.uuid4()), "actions": [action]})
    return out


def _fill(
    text: str, *, lookup: Callable[[str], str], holds: Callable[[str], bool] | None = None
) -> str:
    return card_text.fill(text, lookup, markdown=False, holds=holds)


def _alternative(
    decl: SuggestionDecl,
    ref: str,
    run: RunView,
    label: str,
    fill: Callable[[str], str],
    *,
    several: bool,
) -> dict[str, Any] | None:
    """The suggestion that swaps the declared alternative in for the draft order ``ref``; an
    advice alternative's advice, and for a draft no alternative replaces the
    ``horis:noAlternative`` label, without action (or none)."""
    order = run.resources.get(ref)
    if order is None or order.get("resourceType") != "MedicationRequest":
        return None
    name = order_name(order) or ref
    alt = alternative_for(decl, drug_codes(order, run.resources))
    if alt is None:
        if decl.no_alternative is None:
            return None
        text = fill(decl.no_alternative)
        return {"label": f"{text} ({name})" if several else text, "uuid": str(uuid.uuid4())}
    if alt.medication is None or alt.display is None:
        text = fill(alt.advice or label)
        return {"label": f"{text} ({name})" if several else text, "uuid": str(uuid.uuid4())}
    shown = f"{label}: {alt.display}" + (f" in place of {name}" if several else "")
    actions = alternative_actions(decl, alt, ref, order, decl.description or shown, name)
    return {"label": shown, "uuid": str(uuid.uuid4()), "actions": actions}


def _instances(decl: CardDecl, world: World, focus_id: str) -> list[str | None]:
    """The instances a card is about: one card per instance its ``horis:forEach`` reaches (in
    hydration's order), else one card about the run as a whole (None)."""
    if not decl.for_each:
        return [None]
    return list(world.each(focus_id, decl.for_each, decl.each_where))


def _texts(
    ontology: Ontology,
    decl: CardDecl,
    world: World,
    focus_id: str,
    instance: str | None,
    zone: tzinfo,
    decides: str | None,
    proofs: ProofCache,
) -> tuple[Callable[[str], str], Callable[[str], bool]]:
    """Looks a card placeholder up (the values its path reaches from the focus or the
    instance; for ``because.P`` what decided ``P``), and says whether a section holds."""
    paths = dict(decl.paths)
    rules = dict(decl.rules)

    def label(iri: str) -> str | None:
        if iri in ontology.individuals or iri in ontology.classes:
            return _label(ontology, iri)
        return None

    def reached(name: str) -> tuple[Any, ...] | None:
        steps = paths.get(name)
        subject = instance if name.startswith("instance.") else focus_id
        if steps is None or subject is None:
            return None
        current: tuple[Any, ...] = (subject,)
        for prop, where in steps:
            found: dict[Any, None] = {}
            for node in current:
                if not isinstance(node, str):
                    continue
                for value in world.values(node, prop):
                    keep = where is None or (
                        isinstance(value, str) and True in world.values(value, where)
                    )
                    if keep:
                        found.setdefault(value, None)
            current = tuple(found)
        return current

    def because(prop: str) -> str:
        if not world.values(focus_id, prop):
            return card_text.UNKNOWN
        return deciding_facts(proofs.of(prop), zone) or card_text.UNKNOWN

    def lookup(name: str) -> str:
        if name.startswith("because."):
            steps = paths.get(name)
            return because(steps[0][0]) if steps else card_text.UNKNOWN
        values = reached(name)
        if values is None:
            return card_text.UNKNOWN
        return card_text.show(values, label)

    def holds(name: str) -> bool:
        rule = rules.get(name)
        if rule is not None:
            if decides is None or not world.values(focus_id, decides):
                return False
            return rule in proofs.rules(decides)
        if name.startswith("because."):
            return lookup(name) != card_text.UNKNOWN
        values = reached(name)
        return bool(values) and any(v is not False for v in values or ())

    return lookup, holds


def build_cards(
    *,
    ontology: Ontology,
    service: CdsServiceDef,
    workflow: WorkflowDef,
    world: World,
    run: RunView,
    run_url: str,
) -> list[dict[str, Any]]:
    """The cards of every matching declaration, in document order (one per instance for a
    ``horis:forEach`` declaration), their texts filled from the run's facts."""
    return [
        card
        for _decl, card in declared_cards(
            ontology=ontology,
            service=service,
            workflow=workflow,
            world=world,
            run=run,
            run_url=run_url,
        )
    ]


def declared_cards(
    *,
    ontology: Ontology,
    service: CdsServiceDef,
    workflow: WorkflowDef,
    world: World,
    run: RunView,
    run_url: str,
    proofs: ProofCache | None = None,
) -> list[tuple[CardDecl, dict[str, Any]]]:
    """``build_cards`` with the declaration each card came from (feedback on a card is
    counted against its declaration). ``proofs`` holds the proofs already built for this
    response (by default, only the run's own)."""
    if proofs is None:
        proofs = ProofCache(world, run.focus_id, workflow.decides, run.proof)
    cards: list[tuple[CardDecl, dict[str, Any]]] = []
    run_detail: str | None = None
    for decl in sorted(service.cards, key=lambda d: d.order):
        if not matches(decl, world, run):
            continue
        if run_detail is None:
            run_detail = _detail(ontology, workflow, world, run)
        for instance in _instances(decl, world, run.focus_id):
            lookup, holds = _texts(
                ontology, decl, world, run.focus_id, instance, run.zone, workflow.decides, proofs
            )
            full = card_text.fill(decl.summary, lookup, markdown=False, holds=holds)
            summary = card_text.shorten(full, SUMMARY_LIMIT)
            parts: list[str] = []
            if summary != full:
                parts.append(f"Summary in full: {card_text.markdown_escape(full)}")
            if decl.detail is not None:
                parts.append(card_text.fill(decl.detail, lookup, markdown=True, holds=holds))
            else:
                parts.append(_deciding(ontology, workflow, world, run, proofs))
            suggestions: list[dict[str, Any]] = []
            notes: list[str] = []
            for d in decl.suggestions:
                filler = functools.partial(_fill, lookup=lookup, holds=holds)
                suggestions.extend(_suggestions(d, world, workflow, run, filler, instance, notes))
            parts.extend(card_text.markdown_escape(note) for note in notes)
            parts.append(run_detail)
            detail = "\n\n".join(p for p in parts if p)
            indicator = decl.indicator
            if run.undecided is not None and indicator == "info":
                indicator = "warning"  # an incomplete input mattered: never only information
            card: dict[str, Any] = {
                "uuid": str(uuid.uuid4()),
                "summary": summary,
                "indicator": indicator,
                "detail": detail
                if len(detail) <= DETAIL_LIMIT
                else detail[: DETAIL_LIMIT - 1] + "…",
                "source": source(service),
                "links": [
                    {"label": RUN_LINK_LABEL, "url": run_url, "type": "absolute"},
                    *({"label": lb, "url": url, "type": "absolute"} for lb, url in decl.links),
                ],
            }
            if suggestions:
                card["suggestions"] = suggestions
                card["selectionBehavior"] = decl.selection_behavior or "at-most-one"
            reasons = override_reasons(ontology, service.reasons_for(decl))
            if reasons:
                card["overrideReasons"] = reasons
            orders = _orders_of(decl, world, workflow, run, instance)
            line = _fill(decl.line, lookup=lookup, holds=holds) if decl.line else None
            if orders or line:
                card["extension"] = {CARD_EXTENSION: about(orders, line)}
            cards.append((decl, card))
    return cards


def _orders_of(
    decl: CardDecl, world: World, workflow: WorkflowDef, run: RunView, instance: str | None
) -> list[str]:
    """``Type/id`` of the draft orders a card is about: its own instance's (a ``horis:forEach``
    card), else those its suggestions cite."""
    refs: dict[str, None] = {}
    found = world.instance(instance) if instance is not None else None
    if found is not None and found.source is not None:
        refs[found.source.reference] = None
    else:
        for s in decl.suggestions:
            if s.cites is not None:
                refs.update(dict.fromkeys(cited_resources(world, workflow, run.focus_id, s.cites)))
    return [ref for ref in refs if ref in run.drafts]
