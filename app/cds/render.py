"""The render stage of a hook call: a finished run → the CDS Hooks response the EHR is sent.

:func:`render` builds the cards (the unread-order cards first, then the declared ones whose
conditions hold), the system actions and the ``dev.horismos.run`` extension (run id, terminal,
decision or the inputs that kept it undecided), then checks the whole response against CDS Hooks
2.0: a response that breaks it is a failed run, never sent. It also says which card was issued
under which declaration and rules, for feedback and analytics to be stored against.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import tzinfo
from typing import Any

from app.cds.accept import HookCall
from app.cds.ahead import EXTENSION_KEY
from app.cds.card_parts import unread_order_cards
from app.cds.cards import (
    ProofCache,
    RunView,
    declared_cards,
)
from app.cds.errors import RunFailed
from app.cds.issued import card_issues, rule_names
from app.cds.response_check import check_response
from app.cds.run_story import by_reference, context_resources, detours, failed_actions, narration
from app.cds.system_actions import build_system_actions
from app.cds.unsent import unsent_notices
from app.plandefinition.declared import call_refs
from app.runtime.outcome import Outcome
from app.store.run_rows import CardIssue
from app.world.facts import Violation
from app.world.world import World


@dataclass(frozen=True, kw_only=True)
class Rendered:
    """The answer of one run and the cards it issued."""

    response: dict[str, Any]
    issued: list[CardIssue]


def render(
    call: HookCall,
    outcome: Outcome,
    world: World,
    *,
    violations: Sequence[Violation],
    notices: Sequence[str],
    resources: Sequence[dict[str, Any]],
    run_url: str,
    zone: tzinfo,
) -> Rendered:
    """The response to ``call`` of the run that ended in ``outcome`` over ``world``.

    ``notices`` says what became of each write the run asked the EHR for; ``resources`` are the
    FHIR resources the call carried or read, which the cards may name. Raises ``RunFailed``
    when the response would break CDS Hooks 2.0."""
    ontology, service, workflow, req = call.ontology, call.service, call.workflow, call.req
    focus_id = str(req.context["patientId"])
    view = RunView(
        run_id=outcome.run_id,
        terminal=outcome.terminal,
        decided=outcome.decision is not None,
        undecided=outcome.undecided,
        narration=narration(outcome.trace),
        focus_id=focus_id,
        violations=violations,
        failed_actions=failed_actions(ontology, outcome.trace),
        detours=detours(workflow, outcome.trace, outcome.terminal),
        notices=[*notices, *unsent_notices(ontology, outcome.trace)],
        resources=by_reference([*resources, *context_resources(req.context)]),
        zone=zone,
        proof=outcome.proof,
        drafts=frozenset(by_reference(context_resources(req.context))),
        refs=call_refs(req.context),
        now=world.now,
    )
    # the requests sent without the clinician first: one not sent is said on every card
    unsent: list[str] = []
    actions = build_system_actions(
        service=service, workflow=workflow, world=world, run=view, notes=unsent
    )
    if unsent:
        view = replace(view, notices=[*view.notices, *unsent])
    proofs = ProofCache(world, focus_id, workflow.decides, outcome.proof)
    # while a drug is being chosen (order-select), an order that names none yet has nothing to
    # check: no card (its note stays on the run); signed so, it is said
    selecting = (req.sent_hook or req.hook) == "order-select"
    unread = unread_order_cards(
        ontology=ontology,
        service=service,
        unread=[o for o in req.unread if o.chosen or not selecting],
        run_url=run_url,
    )
    declared = declared_cards(
        ontology=ontology,
        service=service,
        workflow=workflow,
        world=world,
        run=view,
        run_url=run_url,
        proofs=proofs,
    )
    cards = [*unread, *(card for _decl, card in declared)]
    # the decided proof the run already holds; an escalated run's cards show the rules' proof
    # of what they still derived, built here only then (once, shared with the cards)
    proof = outcome.proof
    if proof is None and workflow.decides is not None and declared:
        proof = dict(proofs.of(workflow.decides))
    response: dict[str, Any] = {"cards": cards}
    if actions:
        response["systemActions"] = actions
    response["extension"] = {EXTENSION_KEY: _extension(outcome)}
    problems = check_response(response)
    if problems:
        raise RunFailed.one(
            "exception",
            f"run {outcome.run_id} built a response that breaks CDS Hooks 2.0 and was not "
            "answered: " + "; ".join(str(p) for p in problems),
        )
    return Rendered(response=response, issued=card_issues(declared, unread, rule_names(proof)))


def _extension(outcome: Outcome) -> dict[str, Any]:
    """The run as integrators read it beside the cards: its id, where it ended, and its
    decision or which inputs kept it from deciding."""
    ext: dict[str, Any] = {
        "runId": outcome.run_id,
        "workflow": outcome.workflow,
        "version": outcome.version,
        "terminal": outcome.terminal,
    }
    if outcome.decision is not None:
        ext["decision"] = outcome.decision.to_json()
    if outcome.undecided is not None:
        ext["undecided"] = {
            "property": outcome.undecided.property,
            "inputs": [{"input": i.input, "state": i.state} for i in outcome.undecided.inputs],
        }
    return ext


__all__ = ["Rendered", "render"]
