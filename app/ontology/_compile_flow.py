"""Compiling workflows, steps and CDS services."""

from __future__ import annotations

from typing import Any, cast

from rdflib import Literal, URIRef
from rdflib.term import Node

from app.cds_vocabulary import (
    ACTION_TYPES,
    INDICATORS,
    SELECTION_BEHAVIORS,
    SUGGESTION_ACTION_TYPES,
    listed,
)
from app.ontology import card_text
from app.ontology._compile_base import H
from app.ontology._compile_services import ServicePartsCompiler
from app.ontology.card_text import absolute_http
from app.ontology.classes import Individual
from app.ontology.names import local_name
from app.ontology.services import (
    CardDecl,
    CdsServiceDef,
    PrefetchTemplate,
    SuggestionDecl,
    SystemActionDecl,
    TextSource,
)
from app.ontology.workflows import (
    STEP_CLASSES,
    ArgBinding,
    Branch,
    CandidateQuery,
    StepDef,
    SubflowOutcome,
    WorkflowDef,
)


class FlowCompiler(ServicePartsCompiler):
    """Steps with their edges, workflows, CDS services and cards."""

    # --- steps and workflows -------------------------------------------------------------

    def _edge(self, node: Node, pred: str) -> str | None:
        return self.ref(node, H(pred), self.r.one(node, H(pred)), ("step",))

    def _step(self, node: Node) -> StepDef:
        r, kind = self.r, self.step_kind[node]
        f: dict[str, Any] = {
            "terminal": bool(self.boolean(node, H("terminal"))),
            "next": self._edge(node, "next"),
            "requires": self.conditions(node, H("requires")),
            "on_unsatisfied": self._edge(node, "onUnsatisfied"),
        }
        if kind in ("PerceptionStep", "NarrationStep", "ProposalStep"):
            f["model"] = self.string(node, H("model"))
        if kind in ("PerceptionStep", "ProposalStep"):
            conf = self.number(node, H("confidence"))
            if conf is not None and not 0 <= conf <= 1:
                r.problem(
                    "literal-type", node, "confidence must be between 0 and 1", via=H("confidence")
                )
            f["confidence"] = float(conf) if conf is not None else None
            f["fallback"] = self._edge(node, "fallback")
        if kind in ("PerceptionStep", "ActionStep"):
            f["retries"] = self.count(node, H("retries"))
        if kind == "PerceptionStep":
            f["extracts"] = self.refs(node, H("extracts"), ("class",))
        elif kind == "ReasoningStep":
            f["goal"] = self.conditions(node, H("goal"))
            f["on_unreachable"] = self._edge(node, "onUnreachable")
            f["on_incomplete"] = self._edge(node, "onIncomplete")
        elif kind == "ActionStep":
            f["tool"] = self.ref(node, H("tool"), r.one(node, H("tool")), ("tool",))
            if not r.peek(node, H("tool")):
                r.problem("missing", node, "an ActionStep needs horis:tool")
            f["bindings"] = tuple(self._bind(b) for b in r.objects(node, H("bind")))
            f["on_error"] = self._edge(node, "onError")
            f["for_each"] = self._paths(node, "forEach")
            f["each_where"] = self.conditions(node, H("where"))
            if f["each_where"] and not f["for_each"]:
                r.problem(
                    "missing", node, "horis:where on an ActionStep filters horis:forEach instances"
                )
        elif kind == "NarrationStep":
            target = r.one(node, H("narrates"))
            if target is not None:
                f["narrates"] = self.ref(
                    target, H("property"), r.one(target, H("property")), ("property",)
                )
            f["audience"] = self.string(node, H("audience"))
            f["style"] = self.string(node, H("style"))
            f["required"] = bool(self.boolean(node, H("required")))
            f["on_error"] = self._edge(node, "onError")  # where a required narration's failure goes
        elif kind == "ProposalStep":
            cand = r.one(node, H("candidates"))
            if cand is not None:
                f["candidates"] = self._query(cand)
            f["rank_by"] = self.string(node, H("rankBy"))
            f["selects"] = self.ref(node, H("selects"), r.one(node, H("selects")), ("property",))
        elif kind == "WaitStep":
            f["awaits"] = self.refs(node, H("awaits"), ("property",))
            f["timeout"] = self.duration(node, H("timeout"))
            f["on_timeout"] = self._edge(node, "onTimeout")
        elif kind == "ChoiceStep":
            branches: list[Branch] = []
            for b in r.members(node, H("branches")):
                nxt = self._edge(b, "next")
                when = self.conditions(b, H("when"))
                if not r.peek(b, H("next")):
                    r.problem("missing", b, "a branch needs horis:next")
                if nxt:
                    branches.append(Branch(when=when, next=nxt))
            f["branches"] = tuple(branches)
            f["otherwise"] = self._edge(node, "otherwise")
        elif kind == "SubflowStep":
            f["workflow"] = self.ref(node, H("workflow"), r.one(node, H("workflow")), ("workflow",))
            outcomes: list[SubflowOutcome] = []
            for o in r.objects(node, H("outcome")):
                term, nxt = self._edge(o, "terminal"), self._edge(o, "next")
                if term and nxt:
                    outcomes.append(SubflowOutcome(terminal=term, next=nxt))
            f["outcomes"] = tuple(outcomes)
            f["otherwise"] = self._edge(node, "otherwise")
        return STEP_CLASSES[kind](
            iri=str(node), name=local_name(str(node)), label=self.label(node), **f
        )

    def _paths(self, node: Node, pred: str) -> tuple[tuple[str, ...], ...]:
        """Every ``pred ( p1 p2 … )`` of ``node`` whose properties all resolve."""
        paths: list[tuple[str, ...]] = []
        for head in self.r.objects(node, H(pred)):
            items = self.r.items(head) if self.r.is_list(head) else [head]
            path = tuple(p for p in (self.ref(node, H(pred), i, ("property",)) for i in items) if p)
            if path and len(path) == len(items):
                paths.append(path)
        return tuple(paths)

    def _bind(self, node: Node) -> ArgBinding:
        arg = self.string(node, H("arg"), required=True) or ""
        prop = self.ref(node, H("property"), self.r.one(node, H("property")), ("property",))
        focus = bool(self.boolean(node, H("focus")))
        if (prop is None) == (not focus) and not self.r.peek(node, H("property")):
            self.r.problem("missing", node, "a binding needs horis:property P or horis:focus true")
        return ArgBinding(arg=arg, property=prop, focus=focus)

    def _workflow(self, node: Node, steps: dict[str, StepDef]) -> WorkflowDef:
        r = self.r
        start = self.ref(node, H("startsAt"), r.one(node, H("startsAt")), ("step",))
        if not r.peek(node, H("startsAt")):
            r.problem("missing", node, "needs horis:startsAt (its first step)")
        reached: dict[str, StepDef] = {}
        todo = [start] if start else []
        while todo:
            iri = todo.pop(0)
            if iri in reached or iri not in steps:
                continue
            reached[iri] = steps[iri]
            todo.extend(steps[iri].edges())
        version = r.one(node, H("version"))
        return WorkflowDef(
            iri=str(node),
            name=local_name(str(node)),
            starts_at=start or "",
            steps=reached,
            decides=self.ref(node, H("decides"), r.one(node, H("decides")), ("property",)),
            focus=self.ref(node, H("focus"), r.one(node, H("focus")), ("class",)),
            version=str(version) if isinstance(version, Literal) else "0",
        )

    # --- CDS services --------------------------------------------------------------------

    def _service(self, node: Node) -> CdsServiceDef:
        r = self.r
        prefetch = tuple(
            PrefetchTemplate(
                key=self.string(p, H("key"), required=True) or "",
                query=self.string(p, H("query"), required=True) or "",
            )
            for p in r.objects(node, H("prefetch"))
        )
        text = tuple(
            TextSource(
                resource_type=self.string(t, H("resourceType"), required=True) or "",
                fhir_path=self.string(t, H("fhirPath"), required=True) or "",
            )
            for t in r.objects(node, H("text"))
        )
        cards = tuple(self._card(node, c, i) for i, c in enumerate(r.objects(node, H("card"))))
        actions = tuple(
            self._system_action(a, i) for i, a in enumerate(r.objects(node, H("systemAction")))
        )
        workflow = self.ref(node, H("workflow"), r.one(node, H("workflow")), ("workflow",))
        if not r.peek(node, H("workflow")):
            r.problem("missing", node, "a CDS service needs horis:workflow")
        return CdsServiceDef(
            iri=str(node),
            id=self.string(node, H("id"), required=True) or "",
            hook=self.string(node, H("hook"), required=True) or "",
            title=self.string(node, H("title")) or "",
            description=self.string(node, H("description"), required=True) or "",
            workflow=workflow or "",
            prefetch=prefetch,
            usage_requirements=self.string(node, H("usageRequirements")),
            text=text,
            cards=cards,
            system_actions=actions,
            custom_hook=bool(self.boolean(node, H("customHook"))),
            clock_skew=self._clock_skew(node),
            override_reasons=self.refs(node, H("overrideReason"), ("individual",)),
            documentation=self._documentation(node),
            topic=self._topic(node),
            answered_ahead=bool(self.boolean(node, H("answeredAhead"))),
        )

    def _check_override_reasons(
        self, services: dict[str, CdsServiceDef], individuals: dict[str, Individual]
    ) -> None:
        """An override reason is a CDS Hooks Coding: one ``system|code`` and a display."""
        named = {
            iri
            for svc in services.values()
            for iri in (
                *svc.override_reasons,
                *(i for c in svc.cards for i in c.override_reasons or ()),
            )
        }
        for iri in sorted(named):
            reason = individuals[iri]
            if len(reason.codes) != 1 or "|" not in reason.codes[0]:
                self.r.problem(
                    "missing",
                    URIRef(iri),
                    'an override reason needs exactly one horis:code "system|code"',
                )
            if not reason.label:
                self.r.problem(
                    "missing", URIRef(iri), "an override reason needs an rdfs:label (its display)"
                )

    def _card(self, service: Node, node: Node, order: int) -> CardDecl:
        r = self.r
        indicator = self.string(node, H("indicator"), required=True) or "info"
        if indicator not in INDICATORS:
            r.problem("literal-type", node, f"indicator must be {listed(INDICATORS)}")
            indicator = "info"
        behavior = self.string(node, H("selectionBehavior"))
        if behavior is not None and behavior not in SELECTION_BEHAVIORS:
            said = listed(SELECTION_BEHAVIORS)
            r.problem("literal-type", node, f"selectionBehavior must be {said}")
            behavior = None
        for_each = self._paths(node, "forEach")
        each_where = self.conditions(node, H("where"))
        if each_where and not for_each:
            r.problem("missing", node, "horis:where on a card filters horis:forEach instances")
        summary = self.string(node, H("summary"), required=True) or ""
        detail = self.string(node, H("detail"))
        line = self.string(node, H("line"))
        texts: list[tuple[Node, Node, str]] = [(node, H("summary"), summary)]
        if detail is not None:
            texts.append((node, H("detail"), detail))
        if line is not None:
            texts.append((node, H("line"), line))
        suggestions: list[SuggestionDecl] = []
        for s in r.objects(node, H("suggest")):
            label = self.string(s, H("label"), required=True) or ""
            texts.append((s, H("label"), label))
            no_alternative = self.string(s, H("noAlternative"))
            if no_alternative is not None:
                texts.append((s, H("noAlternative"), no_alternative))
            alternatives = tuple(self._alternative(a) for a in r.objects(s, H("alternative")))
            texts.extend((s, H("advice"), a.advice) for a in alternatives if a.advice)
            activities = self.strings(s, H("activity"))
            suggestions.append(
                SuggestionDecl(
                    label=label,
                    action_type=self._action_type(
                        s,
                        required=not activities
                        and (not alternatives or not all(a.advice for a in alternatives)),
                        default="create" if activities else "update",
                        suggestion=True,
                    ),
                    cites=self.ref(s, H("cites"), r.one(s, H("cites")), ("property",)),
                    description=self.string(s, H("description")),
                    alternatives=alternatives,
                    no_alternative=no_alternative,
                    activities=activities,
                    when=self.conditions(s, H("when")),
                )
            )
        variables, paths, rules = self._variables(service, texts, bool(for_each))
        return CardDecl(
            indicator=cast(Any, indicator),
            summary=summary,
            when=self.conditions(node, H("when")),
            terminal=self._edge(node, "terminal"),
            suggestions=tuple(suggestions),
            selection_behavior=cast(Any, behavior),
            order=order,
            for_each=for_each,
            each_where=each_where,
            detail=detail,
            line=line,
            variables=variables,
            paths=paths,
            rules=rules,
            override_reasons=self.refs(node, H("overrideReason"), ("individual",))
            if r.peek(node, H("overrideReason"))
            else None,
            links=self._links(node),
        )

    def _links(self, node: Node) -> tuple[tuple[str, str], ...]:
        """``horis:link [ horis:label "…" ; horis:url "https://…" ]``… on a card, in document
        order; a link needs a label and an absolute http(s) URL (a load error otherwise)."""
        out = []
        for link in self.r.members(node, H("link")):
            label = self.string(link, H("label"), required=True)
            url = self.string(link, H("url"), required=True)
            if label is not None and not label.strip():
                self.r.problem("literal-type", link, "a card link's horis:label is empty")
            elif url is not None and not absolute_http(url):
                self.r.problem(
                    "literal-type", link, f"horis:url {url!r} is not an absolute http(s) URL"
                )
            elif label and url:
                out.append((label, url))
        return tuple(out)

    def _query(self, node: Node) -> CandidateQuery:
        """``[ horis:path ( … ) | horis:class C ; horis:where ( … ) ]``."""
        r = self.r
        path_nodes = r.members(node, H("path"))
        return CandidateQuery(
            path=tuple(
                p for p in (self.ref(node, H("path"), i, ("property",)) for i in path_nodes) if p
            ),
            class_iri=self.ref(node, H("class"), r.one(node, H("class")), ("class",)),
            where=self.conditions(node, H("where")),
        )

    def _variables(
        self, service: Node, texts: list[tuple[Node, Node, str]], per_instance: bool
    ) -> tuple[
        tuple[tuple[str, str], ...],
        tuple[tuple[str, tuple[tuple[str, str | None], ...]], ...],
        tuple[tuple[str, str], ...],
    ]:
        """What each placeholder of a card's texts names: for ``focus.P…``, ``instance.P…`` and
        ``because.P`` the first property (``variables``) and every step with its filter
        (``paths``); for ``rule.R`` the rule (``rules``). A name that is none of these, a
        property or rule not declared, or a section left open is a load error."""
        namespace = str(service)[: len(str(service)) - len(local_name(str(service)))]
        found: dict[str, str] = {}
        paths: dict[str, tuple[tuple[str, str | None], ...]] = {}
        rules: dict[str, str] = {}
        for owner, pred, text in texts:
            for stray in card_text.stray_tags(text):
                self.r.problem(
                    "literal-type",
                    owner,
                    f"{stray} is not closed or not opened: a section is {{{{#X}}}}…{{{{/X}}}}",
                    via=pred,
                )
            for name in card_text.placeholders(text):
                parsed = card_text.parse(name)
                if parsed is None:
                    self.r.problem(
                        "literal-type",
                        owner,
                        f"{{{{{name}}}}} is not a placeholder: write {{{{focus.P}}}}, "
                        "{{instance.P}}, a path {{focus.P[F].Q}}, {{because.P}} or, in a "
                        "section, rule.R, with P, F, Q declared properties and R a rule",
                        via=pred,
                    )
                    continue
                if parsed.scope == "instance" and not per_instance:
                    self.r.problem(
                        "literal-type",
                        owner,
                        f"{{{{{name}}}}} names the card's instance, but the card has no "
                        "horis:forEach",
                        via=pred,
                    )
                    continue
                if parsed.scope == "rule":
                    rule = parsed.steps[0][0]
                    iri = namespace + rule
                    if self.kinds.get(URIRef(iri)) != "rule":
                        matches = [
                            str(n)
                            for n, kind in self.kinds.items()
                            if kind == "rule" and local_name(str(n)) == rule
                        ]
                        iri = matches[0] if len(matches) == 1 else ""
                    if not iri:
                        self.r.problem(
                            "dangling-reference",
                            owner,
                            f"{{{{{name}}}}}: {rule} is not a declared rule (or is declared in "
                            "several namespaces)",
                            via=pred,
                        )
                        continue
                    rules[name] = iri
                    continue
                steps: list[tuple[str, str | None]] = []
                for prop_name, filter_name in parsed.steps:
                    prop_iri = self._property_named(prop_name, namespace)
                    filter_iri = (
                        self._property_named(filter_name, namespace)
                        if filter_name is not None
                        else None
                    )
                    missing = [
                        n
                        for n, i in ((prop_name, prop_iri), (filter_name, filter_iri))
                        if n is not None and i is None
                    ]
                    if missing or prop_iri is None:
                        self.r.problem(
                            "dangling-reference",
                            owner,
                            f"{{{{{name}}}}}: {', '.join(missing)} is not a declared property "
                            "(or is declared in several namespaces)",
                            via=pred,
                        )
                        break
                    steps.append((prop_iri, filter_iri))
                else:
                    found[name] = steps[0][0]
                    paths[name] = tuple(steps)
        return tuple(found.items()), tuple(paths.items()), tuple(rules.items())

    def _property_named(self, name: str, namespace: str) -> str | None:
        """The declared property with local name ``name`` (the service's namespace first)."""
        if self.kinds.get(URIRef(namespace + name)) == "property":
            return namespace + name
        matches = [
            str(n)
            for n, kind in self.kinds.items()
            if kind == "property" and local_name(str(n)) == name
        ]
        return matches[0] if len(matches) == 1 else None

    def _action_type(
        self,
        node: Node,
        *,
        required: bool = True,
        default: str = "update",
        suggestion: bool = False,
    ) -> Any:
        """``horis:actionType`` of a suggestion or system action (a suggestion whose
        alternatives all give advice acts on nothing, and one creating its ``horis:activity``
        says what it does: they may leave it out, ``default`` then)."""
        action = self.string(node, H("actionType"), required=required) or (
            "create" if required else default
        )
        allowed: tuple[str, ...] = SUGGESTION_ACTION_TYPES if suggestion else ACTION_TYPES
        if action not in allowed:
            listed = ", ".join(f'"{a}"' for a in allowed)
            self.r.problem("literal-type", node, f"actionType must be one of {listed}")
            action = "create"
        return action

    def _system_action(self, node: Node, order: int) -> SystemActionDecl:
        r = self.r
        return SystemActionDecl(
            action_type=self._action_type(node),
            description=self.string(node, H("description"), required=True) or "",
            cites=self.ref(node, H("cites"), r.one(node, H("cites")), ("property",)),
            activity=self.string(node, H("activity")),
            when=self.conditions(node, H("when")),
            terminal=self._edge(node, "terminal"),
            order=order,
        )
