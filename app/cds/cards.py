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
same way (``build_system_actions``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, tzinfo
from typing import Any

from app.cds.leniency import UnreadOrder
from app.clinical_text import proof_markdown
from app.ontology import card_text
from app.ontology.card_text import markdown_escape
from app.ontology.model import (
    CardDecl,
    CdsServiceDef,
    Ontology,
    SuggestionDecl,
    SystemActionDecl,
    WorkflowDef,
    humanise,
    local_name,
)
from app.world.facts import Violation
from app.world.world import World

SUMMARY_LIMIT = 139
DETAIL_LIMIT = 8000
RUN_LINK_LABEL = "Decision record: proof and trace"


@dataclass(frozen=True, kw_only=True)
class RunView:
    """What the card builder needs from a finished run."""

    run_id: str
    terminal: str | None  # local name of the terminal step
    decided: bool
    #: the run's ``undecided`` outcome: the incomplete inputs that could change the decision
    undecided: Mapping[str, Any] | None = None
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


def _label(ontology: Ontology, iri: str) -> str:
    for table in (ontology.properties, ontology.classes, ontology.individuals):
        node = table.get(iri)
        if node is not None:
            return getattr(node, "label", None) or humanise(node.name)
    return humanise(local_name(iri))


def _matches(decl: CardDecl | SystemActionDecl, world: World, run: RunView) -> bool:
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


def _detail(ontology: Ontology, workflow: WorkflowDef, world: World, run: RunView) -> str:
    parts: list[str] = [markdown_escape(d) for d in run.detours]
    if run.undecided is not None:
        parts.append(undecided_markdown(run.undecided))
    elif run.decided and workflow.decides is not None:
        if run.narration:
            parts.append(markdown_escape(run.narration))
        proof = world.proof(run.focus_id, workflow.decides).to_json()
        parts.append(proof_markdown(proof, run.zone))
    elif workflow.decides is not None:
        missing = missing_inputs(ontology, world, workflow.decides, run.focus_id)
        what = _label(ontology, workflow.decides)
        if missing:
            parts.append(
                markdown_escape(f"No {what} was decided. Missing data: {', '.join(missing)}.")
            )
        else:
            parts.append(markdown_escape(f"No {what} was decided from the data available."))
    parts.extend(markdown_escape(n) for n in run.notices)
    parts.extend(markdown_escape(f) for f in run.failed_actions)
    for v in run.violations:
        parts.append(markdown_escape(f"Refused input ({v.code}): {v.message}"))
    return "\n\n".join(parts)


def undecided_markdown(undecided: Mapping[str, Any]) -> str:
    """What a clinician reads when a decision was not made because inputs were incomplete: each
    input and why it is not complete (hydration's words), what it could have changed, and the
    value the rules held on the rest of the data — said not to be a decision. The labels are the
    run's own (``Outcome.undecided``)."""
    what = str(undecided.get("propertyLabel") or "decision")
    opening = f"**No {markdown_escape(what)} was decided**"
    lines = [f"{opening}: data it depends on is missing or was not used."]
    for item in undecided.get("inputs") or ():
        reasons = [r.get("detail") or "" for r in item.get("reasons") or ()]
        said = "; ".join(r for r in reasons if r) or f"No {item.get('label')} could be used"
        lines.append(f"- {markdown_escape(said)}")
        could = sorted(
            {
                str(c["ruleLabel"])
                + (f" ({c['valueLabel']})" if c.get("valueLabel") is not None else "")
                for c in item.get("couldChange") or ()
                if c.get("ruleLabel")
            }
        )
        if could:
            lines.append(f"  - could change it: {markdown_escape(', '.join(could))}")
    held = undecided.get("heldLabel")
    if held is not None:
        lines.append("")
        lines.append(
            markdown_escape(
                f"On the data that could be used the rules give {what}: {held}. "
                "This is not a decision."
            )
        )
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


def _suggestions(
    decl: SuggestionDecl,
    world: World,
    workflow: WorkflowDef,
    run: RunView,
    label: str,
    instance: str | None,
) -> list[dict[str, Any]]:
    if decl.cites is None:
        # in a horis:forEach card: the card's own instance, read from its resource
        found = world.instance(instance) if instance is not None else None
        if found is None or found.source is None:
            return []
        action = cited_action(
            decl.action_type, decl.description or label, found.source.reference, run.resources
        )
        if action is None:
            return []
        return [{"label": label, "uuid": str(uuid.uuid4()), "actions": [action]}]
    out = []
    for ref in cited_resources(world, workflow, run.focus_id, decl.cites):
        action = cited_action(decl.action_type, decl.description or label, ref, run.resources)
        if action is None:
            continue
        out.append({"label": f"{label} ({ref})", "uuid": str(uuid.uuid4()), "actions": [action]})
    return out


def _instances(decl: CardDecl, world: World, focus_id: str) -> list[str | None]:
    """The instances a card is about: one card per instance its ``horis:forEach`` reaches (in
    hydration's order), else one card about the run as a whole (None)."""
    if not decl.for_each:
        return [None]
    return list(world.each(focus_id, decl.for_each, decl.each_where))


def _texts(
    ontology: Ontology, decl: CardDecl, world: World, focus_id: str, instance: str | None
) -> Callable[[str], str]:
    """Looks a card placeholder up: the values of its property on the focus or the instance."""
    variables = dict(decl.variables)

    def label(iri: str) -> str | None:
        if iri in ontology.individuals or iri in ontology.classes:
            return _label(ontology, iri)
        return None

    def lookup(name: str) -> str:
        prop = variables.get(name)
        subject = instance if name.startswith("instance.") else focus_id
        if prop is None or subject is None:
            return card_text.UNKNOWN
        return card_text.show(world.values(subject, prop), label)

    return lookup


def _reasons(decl: CardDecl, world: World, instance: str | None, zone: tzinfo) -> list[str]:
    """For a card about one instance: the proof of each property its filter read on it, as
    the clinician reads a proof."""
    if instance is None:
        return []
    out: list[str] = []
    for prop in dict.fromkeys(c.path[0] for c in decl.each_where):
        if world.values(instance, prop):
            out.append(proof_markdown(world.proof(instance, prop).to_json(), zone))
    return out


def _source(ontology: Ontology, service: CdsServiceDef) -> dict[str, Any]:
    return {"label": f"Horismos · {service.title} (ontology {ontology.version})"}


def unread_order_cards(
    *,
    ontology: Ontology,
    service: CdsServiceDef,
    unread: Sequence[UnreadOrder],
    run_url: str,
) -> list[dict[str, Any]]:
    """One warning card per draft order that could not be read: it was not checked, and an
    answer without a card for it would read as "all clear"."""
    cards: list[dict[str, Any]] = []
    for order in unread:
        name = order.name if order.name != order.reference else "A draft order"
        summary = card_text.shorten(
            f"{name} not checked: the draft order could not be read", SUMMARY_LIMIT
        )
        detail = (
            f"{name} ({order.reference}) was not checked by {service.title}: the draft order "
            f"could not be read: {order.reason}. Complete the order and sign it again to have "
            "it checked."
        )
        cards.append(
            {
                "uuid": str(uuid.uuid4()),
                "summary": summary,
                "indicator": "warning",
                "detail": card_text.markdown_escape(detail),
                "source": _source(ontology, service),
                "links": [{"label": RUN_LINK_LABEL, "url": run_url, "type": "absolute"}],
            }
        )
    return cards


def override_reasons(ontology: Ontology, reasons: Sequence[str]) -> list[dict[str, str]]:
    """The CDS Hooks ``overrideReasons`` (Codings) of the override-reason individuals given
    (the loader made sure each has one ``system|code`` and a label)."""
    out: list[dict[str, str]] = []
    for iri in reasons:
        reason = ontology.individuals[iri]
        system, _, code = reason.codes[0].rpartition("|")
        out.append({"system": system, "code": code, "display": reason.label or code})
    return out


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
) -> list[tuple[CardDecl, dict[str, Any]]]:
    """``build_cards`` with the declaration each card came from (feedback on a card is
    counted against its declaration)."""
    cards: list[tuple[CardDecl, dict[str, Any]]] = []
    run_detail: str | None = None
    for decl in sorted(service.cards, key=lambda d: d.order):
        if not _matches(decl, world, run):
            continue
        if run_detail is None:
            run_detail = _detail(ontology, workflow, world, run)
        for instance in _instances(decl, world, run.focus_id):
            lookup = _texts(ontology, decl, world, run.focus_id, instance)
            full = card_text.fill(decl.summary, lookup, markdown=False)
            summary = card_text.shorten(full, SUMMARY_LIMIT)
            parts: list[str] = []
            if summary != full:
                parts.append(f"Summary in full: {card_text.markdown_escape(full)}")
            if decl.detail is not None:
                parts.append(card_text.fill(decl.detail, lookup, markdown=True))
            parts.extend(_reasons(decl, world, instance, run.zone))
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
                "source": _source(ontology, service),
                "links": [{"label": RUN_LINK_LABEL, "url": run_url, "type": "absolute"}],
            }
            suggestions = [
                s
                for d in decl.suggestions
                for s in _suggestions(
                    d,
                    world,
                    workflow,
                    run,
                    card_text.fill(d.label, lookup, markdown=False),
                    instance,
                )
            ]
            if suggestions:
                card["suggestions"] = suggestions
                card["selectionBehavior"] = decl.selection_behavior or "at-most-one"
            reasons = override_reasons(ontology, service.reasons_for(decl))
            if reasons:
                card["overrideReasons"] = reasons
            cards.append((decl, card))
    return cards


def build_system_actions(
    *, service: CdsServiceDef, workflow: WorkflowDef, world: World, run: RunView
) -> list[dict[str, Any]]:
    """The response's ``systemActions``: for every matching ``horis:systemAction``, in document
    order, one action per resource the decision's proof cites (duplicates dropped)."""
    out: list[dict[str, Any]] = []
    for decl in sorted(service.system_actions, key=lambda d: d.order):
        if decl.cites is None or not _matches(decl, world, run):
            continue
        for ref in cited_resources(world, workflow, run.focus_id, decl.cites):
            action = cited_action(decl.action_type, decl.description, ref, run.resources)
            if action is not None and action not in out:
                out.append(action)
    return out
