"""Verification of each CDS service and its cards: ids and prefetch keys are unique, the service
runs a workflow with a focus, each card and system action names a terminal step of it, their
conditions type-check, a card's ``horis:forEach`` reaches one class, a summary fits the card
limit, a system action cites an object property of the focus (and is not ``create``), and a
suggestion's ``horis:activity`` is an R4 ActivityDefinition in FHIRPath.
"""

from __future__ import annotations

from collections import Counter

from app.ontology._verify_foreach import ForEachChecker
from app.ontology.activity import activity_problems
from app.ontology.card_text import SUMMARY_MAX_LENGTH, static_length
from app.ontology.hooks import HOOKS
from app.ontology.names import local_name
from app.ontology.rules import Condition
from app.ontology.services import CardDecl, CdsServiceDef, SuggestionDecl, SystemActionDecl
from app.ontology.workflows import WorkflowDef


class ServiceChecker(ForEachChecker):
    """The checks of ``services`` (every CDS service of the ontology)."""

    def services(self) -> None:
        ids = Counter(s.id for s in self.o.services.values())
        for s in self.o.services.values():
            if ids[s.id] > 1:
                self.add("service", s.iri, f'horis:id "{s.id}" is used by another service')
            keys = Counter(p.key for p in s.prefetch)
            for key, n in keys.items():
                if n > 1:
                    self.add("service", s.iri, f'prefetch key "{key}" is declared {n} times')
            w = self.o.workflows.get(s.workflow)
            if w is None:
                self.add("service", s.iri, "horis:workflow must name a declared workflow")
                continue
            if w.focus is None:
                self.add(
                    "service",
                    s.iri,
                    f"its workflow {w.name} needs horis:focus (the class of the hook's subject)",
                )
            for card in s.cards:
                where = f"horis:card[{card.order + 1}]"
                if static_length(card.summary) > SUMMARY_MAX_LENGTH:
                    self.add(
                        "service",
                        s.iri,
                        f"a card summary must be at most {SUMMARY_MAX_LENGTH} characters (its "
                        "text without placeholders; CDS Hooks: less than 140)",
                        where,
                    )
                self._match(s, w, card.terminal, card.when, where)
                self._card_instances(s, w, card, where)
                for i, suggestion in enumerate(card.suggestions):
                    at = f"{where}/horis:suggest[{i + 1}]"
                    self._match(s, w, None, suggestion.when, at)
                    if suggestion.activities:
                        self._activity(s, suggestion, at)
                    elif suggestion.action_type == "none":
                        if suggestion.cites is not None or suggestion.alternatives:
                            self.add(
                                "service",
                                s.iri,
                                'a suggestion of actionType "none" acts on nothing: without '
                                "horis:cites or horis:alternative",
                                at,
                            )
                    else:
                        self._alternatives(s, card, suggestion, at)
            for action in s.system_actions:
                self._system_action(s, w, action)

    def _match(
        self,
        s: CdsServiceDef,
        w: WorkflowDef,
        terminal: str | None,
        when: tuple[Condition, ...],
        where: str,
    ) -> None:
        """A card's or system action's ``horis:terminal`` and ``horis:when``."""
        if terminal is not None:
            step = w.steps.get(terminal)
            if step is None or not step.terminal:
                self.add(
                    "service",
                    s.iri,
                    f"horis:terminal {local_name(terminal)} is not a terminal step of {w.name}",
                    where,
                )
        for c in when:
            self.condition_on(c, w.focus, s.iri, where)

    def _card_instances(self, s: CdsServiceDef, w: WorkflowDef, card: CardDecl, where: str) -> None:
        """A card's ``horis:forEach`` and the properties its placeholders read."""
        instance: str | None = None
        if card.for_each:
            at = f"{where}/horis:forEach"
            instance = self.each_class(w.focus, card.for_each, card.each_where, s.iri, at)
        for name, iri in card.variables:
            prop = self.o.properties.get(iri)
            if prop is not None:
                subject = instance if name.startswith("instance.") else w.focus
                self.check_domain(prop, subject, s.iri, f"{where} {{{{{name}}}}}")

    def _alternatives(
        self, s: CdsServiceDef, card: CardDecl, decl: SuggestionDecl, where: str
    ) -> None:
        """A suggestion's ``horis:alternative``: an order the hook can swap in for a draft order
        it was sent, for a drug the deployment knows."""
        if not decl.alternatives:
            if decl.no_alternative is not None:
                self.add(
                    "service",
                    s.iri,
                    "horis:noAlternative labels a draft order no horis:alternative replaces: "
                    "declare the alternatives, or remove it",
                    where,
                )
            return
        if decl.action_type == "delete":
            self.add(
                "service",
                s.iri,
                'an alternative order is swapped in by an "update" of the draft order (or a '
                '"create" beside its "delete"): a "delete" suggestion cannot carry one',
                where,
            )
        fields = HOOKS.get(s.hook)
        if fields is not None and not any(f.name == "draftOrders" for f in fields):
            self.add(
                "service",
                s.iri,
                f"the {s.hook} hook sends no draft orders, so the EHR has no order to swap an "
                "alternative into: alternatives belong to order-select and order-sign services",
                where,
            )
        cited = decl.cites or (card.for_each[0][-1] if card.for_each else None)
        prop = self.o.properties.get(cited or "")
        if prop is not None and (
            not prop.from_fhir
            or any(
                m.resource_type != "MedicationRequest" or m.context_key != "draftOrders"
                for m in prop.from_fhir
            )
        ):
            self.add(
                "service",
                s.iri,
                f"{prop.name} is not read from the hook's draft MedicationRequests "
                '(horis:fromContext "draftOrders"): an alternative replaces the drug of a draft '
                "medication order",
                where,
            )
        for alt in decl.alternatives:
            for code in (*alt.replaces, *([alt.medication] if alt.medication else [])):
                if not self.o.knows_code(code):
                    self.add(
                        "service",
                        s.iri,
                        f'the alternative names "{code}", a code this deployment does not know '
                        "(no class, individual, value set or mapping of it has it): fix the code, "
                        "or declare the drug",
                        where,
                    )

    def _activity(self, s: CdsServiceDef, decl: SuggestionDecl, where: str) -> None:
        """A suggestion's ``horis:activity``: each request it creates, an R4 ActivityDefinition
        whose logic is FHIRPath, on a suggestion that creates and cites nothing."""
        for i, text in enumerate(decl.activities):
            for problem in activity_problems(text):
                self.add("service", s.iri, f"horis:activity[{i + 1}]: {problem}", where)
        if decl.action_type != "create" or decl.cites is not None or decl.alternatives:
            self.add(
                "service",
                s.iri,
                "a suggestion with horis:activity creates the request it defines: actionType "
                '"create", without horis:cites or horis:alternative',
                where,
            )

    def _system_action(self, s: CdsServiceDef, w: WorkflowDef, a: SystemActionDecl) -> None:
        where = f"horis:systemAction[{a.order + 1}]"
        self._match(s, w, a.terminal, a.when, where)
        if a.activity is not None:
            for problem in activity_problems(a.activity):
                self.add("service", s.iri, f"horis:activity: {problem}", where)
            if a.action_type != "create" or a.cites is not None:
                self.add(
                    "service",
                    s.iri,
                    "a system action with horis:activity creates the request it defines: "
                    'actionType "create", without horis:cites',
                    where,
                )
            return
        if a.action_type == "create":
            self.add(
                "service",
                s.iri,
                'a "create" system action needs a new resource, which the service cannot build '
                "from the graph: declare the request it creates (horis:activity), or use "
                '"delete" or "update" with horis:cites P',
                where,
            )
            return
        prop = self.o.properties.get(a.cites or "")
        if prop is None:
            self.add(
                "service",
                s.iri,
                "a system action needs horis:cites P (the property through which the decision's "
                "proof reaches the FHIR resource it acts on)",
                where,
            )
            return
        if not prop.is_object:
            self.add(
                "service",
                s.iri,
                f"horis:cites {prop.name} holds {local_name(prop.range)} values, not instances "
                "read from FHIR resources: cite an object property",
                where,
            )
        self.check_domain(prop, w.focus, s.iri, where)
        if w.decides is None:
            self.add(
                "service",
                s.iri,
                f"a system action cites the proof of the decision, but {w.name} has no "
                "horis:decides",
                where,
            )
