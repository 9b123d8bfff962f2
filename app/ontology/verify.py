"""Static verification of a compiled ontology; ``horismos verify`` runs it.

``verify(ontology)`` returns every problem found (empty = sound) and never raises. Checks:

- mandatory failure edges: PerceptionStep and ProposalStep ``horis:fallback``, ReasoningStep
  ``horis:onUnreachable``, ActionStep ``horis:onError`` (not for a terminal ActionStep: a failing
  tool there still ends the run at that terminal, and the trace records the error), ChoiceStep
  ``horis:otherwise``, a WaitStep with ``horis:timeout`` ``horis:onTimeout``, a SubflowStep
  ``horis:otherwise`` unless its outcomes cover every terminal of the subflow;
- every edge resolves, every non-terminal step has a way forward, graphs are acyclic (so every
  path ends at a terminal step), subflow depth ≤ 1;
- rules are stratifiable, and every condition, conclusion, binding and effect type-checks
  (``app.ontology._typecheck``);
- ``horis:decides`` names a property of the focus class; every ``horis:requires`` property can
  be produced before the step (see ``_producible``) unless the step has ``horis:onUnsatisfied``;
  ActionStep bindings cover exactly the tool's arguments, with fitting types, read on the focus
  or, with ``horis:forEach``, on the class its paths reach;
- every CDS service runs a workflow with a focus, its card and system action terminals are
  terminal steps of that workflow, their conditions type-check, a system action cites an object
  property of the focus (and is not ``create``), ids and prefetch keys are unique
  (``app.ontology._verify_services``; a ``horis:forEach``, ``app.ontology._verify_foreach``);
- a NarrationStep with ``horis:required true`` declares ``horis:onError`` unless terminal;
- what would fail silently at run time: units are UCUM, FHIRPath names real R4B elements, code
  systems are absolute URIs (``app.ontology._verify_fhir``); each service's hook is in the
  registry and its prefetch templates use only that hook's tokens and feed every mapping
  (``app.ontology._verify_hooks``); every mapped property and coded class has a reader
  (``app.ontology._verify_reach``);
- value sets and concept maps: no class is empty after expansion, every map's targets are
  codes the deployment lists, every value set a class is defined by says its version
  (``app.ontology._verify_terminology``).
"""

from __future__ import annotations

from collections import Counter

from app.ontology._verify_fhir import FhirChecker
from app.ontology._verify_hooks import HookChecker
from app.ontology._verify_reach import ReachChecker
from app.ontology._verify_services import ServiceChecker
from app.ontology._verify_terminology import TerminologyChecker
from app.ontology.errors import Problem, in_files
from app.ontology.model import Ontology
from app.ontology.names import local_name
from app.ontology.workflows import (
    ActionStep,
    ChoiceStep,
    NarrationStep,
    PerceptionStep,
    ProposalStep,
    ReasoningStep,
    StepDef,
    SubflowStep,
    WaitStep,
    WorkflowDef,
)


def verify(ontology: Ontology) -> list[Problem]:
    """Every problem in ``ontology``; an empty list means it is sound."""
    v = _Verifier(ontology)
    v.run_types()
    for w in ontology.workflows.values():
        v.workflow(w)
    v.services()
    v.run_fhir()
    v.run_hooks()
    v.run_reach()
    v.run_terminology()
    for iri in ontology.unreachable_steps:
        v.add(
            "unreachable",
            iri,
            "no workflow reaches this step from its horis:startsAt: link it with an edge, or "
            "remove it",
        )
    return in_files(list(dict.fromkeys(v.problems)), ontology.origins)


_NEEDS_NEXT = (
    "PerceptionStep",
    "ReasoningStep",
    "ActionStep",
    "NarrationStep",
    "ProposalStep",
    "WaitStep",
    "Step",
)


class _Verifier(FhirChecker, HookChecker, ReachChecker, TerminologyChecker, ServiceChecker):
    # --- one workflow --------------------------------------------------------------------

    def workflow(self, w: WorkflowDef) -> None:
        if w.starts_at not in self.steps:
            self.add("unresolved-edge", w.iri, "horis:startsAt must name a declared step")
            return
        if w.decides is not None:
            prop = self.o.properties.get(w.decides)
            if prop is None:
                self.add("decides", w.iri, "horis:decides must name a declared property")
            elif w.focus is None:
                self.add(
                    "decides",
                    w.iri,
                    "horis:decides needs horis:focus (the class it is decided for)",
                )
            elif not self.o.is_subclass(w.focus, prop.domain):
                self.add(
                    "decides",
                    w.iri,
                    f"horis:decides {prop.name} is a property of {local_name(prop.domain)}, "
                    f"not of the focus {local_name(w.focus)}",
                )
        for step in w.steps.values():
            self._step(w, step)
        self._acyclic(w)

    def _step(self, w: WorkflowDef, s: StepDef) -> None:
        for edge in s.edges():
            if edge not in self.steps:
                self.add("unresolved-edge", s.iri, f"edge to {edge} does not name a declared step")
        self._failure_edges(s)
        self._forward(s)
        for pred, c in s.conditions():
            self.condition_on(c, w.focus, s.iri, pred)
        if isinstance(s, ActionStep):
            self._bindings(w, s)
        elif isinstance(s, PerceptionStep) and not s.extracts:
            self.add(
                "type-check", s.iri, "a PerceptionStep needs horis:extracts (the classes it reads)"
            )
        elif isinstance(s, ReasoningStep) and not s.goal:
            self.add("type-check", s.iri, "a ReasoningStep needs horis:goal [ … ]")
        elif isinstance(s, ProposalStep):
            self._proposal(w, s)
        elif isinstance(s, WaitStep) and not s.awaits:
            self.add(
                "type-check", s.iri, "a WaitStep needs horis:awaits (the properties it waits for)"
            )
        elif isinstance(s, SubflowStep):
            self._subflow(w, s)
        elif isinstance(s, NarrationStep) and s.narrates is None:
            self.add(
                "type-check", s.iri, "a NarrationStep needs horis:narrates [ horis:property P ]"
            )
        if s.requires and s.on_unsatisfied is None:
            self._requires(w, s)

    def _failure_edges(self, s: StepDef) -> None:
        missing: str | None = None
        if isinstance(s, PerceptionStep | ProposalStep) and s.fallback is None:
            missing = "horis:fallback (where to go when the Bridge fails or is unsure)"
        elif isinstance(s, ReasoningStep) and s.on_unreachable is None:
            missing = "horis:onUnreachable (where to go when the goal cannot hold)"
        elif isinstance(s, ActionStep) and not s.terminal and s.on_error is None:
            missing = "horis:onError (where to go when the tool fails)"
        elif isinstance(s, NarrationStep) and s.required and not s.terminal and s.on_error is None:
            missing = (
                "horis:onError (where to go when its required narration fails: no Bridge, a "
                "Bridge error, nothing to narrate)"
            )
        elif isinstance(s, ChoiceStep) and s.otherwise is None:
            missing = "horis:otherwise (where to go when no branch matches)"
        elif isinstance(s, WaitStep) and s.timeout is not None and s.on_timeout is None:
            missing = "horis:onTimeout (where to go when the wait times out)"
        if missing:
            article = "an" if s.kind[0] in "AEIOU" else "a"
            self.add("failure-edge", s.iri, f"{article} {s.kind} must declare {missing}")

    def _forward(self, s: StepDef) -> None:
        if s.terminal:
            if s.next is not None:
                self.add("no-terminal", s.iri, "a terminal step cannot have horis:next; remove one")
            return
        if s.kind in _NEEDS_NEXT and s.next is None:
            self.add(
                "no-terminal",
                s.iri,
                "is not terminal and has no horis:next: add horis:next, or horis:terminal true",
            )
        elif isinstance(s, ChoiceStep) and not s.branches and s.otherwise is None:
            self.add("no-terminal", s.iri, "a ChoiceStep needs horis:branches ( … )")
        elif isinstance(s, SubflowStep) and not s.outcomes and s.otherwise is None:
            self.add("no-terminal", s.iri, "a SubflowStep needs horis:outcome or horis:otherwise")

    def _acyclic(self, w: WorkflowDef) -> None:
        state: dict[str, int] = {}  # 1 = on the current path, 2 = done

        def visit(iri: str, trail: list[str]) -> None:
            state[iri] = 1
            for nxt in self.steps[iri].edges() if iri in self.steps else ():
                if nxt not in w.steps:
                    continue
                if state.get(nxt) == 1:
                    loop = [*trail[trail.index(nxt) :], iri, nxt] if nxt in trail else [iri, nxt]
                    names = " → ".join(local_name(x) for x in dict.fromkeys(loop)) + (
                        f" → {local_name(nxt)}"
                    )
                    self.add(
                        "cycle",
                        iri,
                        f"workflow {w.name} loops ({names}); workflows must be acyclic — "
                        "send this edge forward to a terminal step",
                    )
                elif nxt not in state:
                    visit(nxt, [*trail, iri])
            state[iri] = 2

        visit(w.starts_at, [])

    # --- kinds ---------------------------------------------------------------------------

    def _bindings(self, w: WorkflowDef, s: ActionStep) -> None:
        tool = self.o.tools.get(s.tool or "")
        if tool is None:
            self.add("type-check", s.iri, "an ActionStep needs horis:tool naming a declared tool")
            return
        subject = (
            self.each_class(w.focus, s.for_each, s.each_where, s.iri, "horis:forEach")
            if s.for_each
            else w.focus
        )
        args = {a.name: a for a in tool.args}
        bound = Counter(b.arg for b in s.bindings)
        for name in args:
            if name not in bound:
                self.add(
                    "bindings",
                    s.iri,
                    f'argument "{name}" of {tool.name} is not bound: add horis:bind '
                    f'[ horis:arg "{name}" ; horis:property P ] (or horis:focus true)',
                )
        for name, n in bound.items():
            if name not in args:
                self.add("bindings", s.iri, f'binds "{name}", which {tool.name} does not take')
            elif n > 1:
                self.add("bindings", s.iri, f'binds "{name}" {n} times')
        for b in s.bindings:
            arg = args.get(b.arg)
            if arg is None:
                continue
            if b.focus:
                if subject is None:
                    self.add(
                        "bindings",
                        s.iri,
                        f'binds "{b.arg}" to the focus, but {w.name} has no horis:focus',
                    )
                elif not self.o.is_subclass(subject, arg.type):
                    self.add(
                        "bindings",
                        s.iri,
                        f'"{b.arg}" takes {local_name(arg.type)}, '
                        f"the focus is {local_name(subject)}",
                    )
                continue
            prop = self.o.properties.get(b.property or "")
            if prop is None:
                continue
            if subject is not None and not self.o.is_subclass(subject, prop.domain):
                self.add(
                    "bindings",
                    s.iri,
                    f'"{b.arg}" is bound to {prop.name}, which the focus {local_name(subject)} '
                    "does not carry",
                )
            fits = prop.range == arg.type or (
                prop.range in self.o.classes and self.o.is_subclass(prop.range, arg.type)
            )
            if not fits:
                self.add(
                    "bindings",
                    s.iri,
                    f'"{b.arg}" takes {local_name(arg.type)}, but {prop.name} holds '
                    f"{local_name(prop.range)}",
                )

    def _proposal(self, w: WorkflowDef, s: ProposalStep) -> None:
        if s.candidates is None:
            self.add("type-check", s.iri, "a ProposalStep needs horis:candidates [ … ]")
            return
        selects = self.o.properties.get(s.selects or "")
        if selects is None:
            self.add(
                "type-check", s.iri, "a ProposalStep needs horis:selects (the property it sets)"
            )
        else:
            self.check_domain(selects, w.focus, s.iri, "horis:selects")
        cand = s.candidates
        if bool(cand.path) == (cand.class_iri is not None):
            self.add(
                "type-check",
                s.iri,
                "horis:candidates needs exactly one of horis:path ( … ) or horis:class C",
            )
        subject = cand.class_iri
        current = w.focus
        for iri in cand.path:
            prop = self.o.properties.get(iri)
            if prop is None:
                return
            if current is not None:
                self.check_domain(prop, current, s.iri, "horis:candidates")
            current = prop.range
        subject = subject or current
        for c in cand.where:
            self.condition_on(c, subject, s.iri, "horis:candidates")

    def _subflow(self, w: WorkflowDef, s: SubflowStep) -> None:
        target = self.o.workflows.get(s.workflow or "")
        if target is None:
            self.add("type-check", s.iri, "a SubflowStep needs horis:workflow naming a workflow")
            return
        if target.iri == w.iri:
            self.add("subflow-depth", s.iri, f"{w.name} runs itself as a subflow")
            return
        nested = [x for x in target.steps.values() if isinstance(x, SubflowStep)]
        if nested:
            self.add(
                "subflow-depth",
                s.iri,
                f"subflow {target.name} itself has a SubflowStep ({nested[0].name}); one level "
                "of nesting is supported",
            )
        terminals = {x.iri for x in target.steps.values() if x.terminal}
        for o in s.outcomes:
            if o.terminal not in terminals:
                self.add(
                    "type-check",
                    s.iri,
                    f"horis:outcome names {local_name(o.terminal)}, which is not a terminal step "
                    f"of {target.name}",
                )
        uncovered = terminals - {o.terminal for o in s.outcomes}
        if uncovered and s.otherwise is None:
            names = ", ".join(sorted(local_name(t) for t in uncovered))
            self.add(
                "failure-edge",
                s.iri,
                f"a SubflowStep must map every terminal of {target.name} or declare "
                f"horis:otherwise (unmapped: {names})",
            )

    # --- requires ------------------------------------------------------------------------

    def _upstream(self, w: WorkflowDef, target: str) -> list[StepDef]:
        preds: dict[str, set[str]] = {}
        for s in w.steps.values():
            for e in s.edges():
                preds.setdefault(e, set()).add(s.iri)
        seen: set[str] = set()
        todo = list(preds.get(target, ()))
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            todo.extend(preds.get(n, ()))
        out = [w.steps[n] for n in seen if n in w.steps]
        for s in list(out):
            sub = self.o.workflows.get(s.workflow or "") if isinstance(s, SubflowStep) else None
            if sub is not None:
                out.extend(sub.steps.values())
        return out

    def _requires(self, w: WorkflowDef, s: StepDef) -> None:
        upstream = self._upstream(w, s.iri)
        for c in s.requires:
            if c.op == "isAssigned" and c.value is False:
                continue
            for iri in c.path:
                if not self._producible(iri, upstream):
                    self.add(
                        "requires",
                        s.iri,
                        f"horis:requires reads {local_name(iri)}, which nothing before this step "
                        "produces (no rule concludes it, no horis:fromFhir, no upstream tool "
                        "effect, extraction, wait or proposal): add one, or horis:onUnsatisfied",
                    )

    def _producible(self, iri: str, upstream: list[StepDef]) -> bool:
        """Whether a property can hold before a step whose upstream steps are given.

        Rules run at every transaction, and FHIR-mapped properties are hydrated before the run
        starts, so those are always producible; otherwise an upstream step must produce it.
        """
        p = self.o.properties.get(iri)
        if p is None:
            return False
        if self.o.rules_for(iri) or p.from_fhir:
            return True
        for u in upstream:
            tool = self.o.tools.get(u.tool or "") if isinstance(u, ActionStep) else None
            if tool is not None and any(e.property == iri for e in tool.effects):
                return True
            if isinstance(u, PerceptionStep) and not p.rules_only:
                for c in u.extracts:
                    if self.o.is_subclass(c, p.domain) or self.o.is_subclass(p.domain, c):
                        return True
            if isinstance(u, WaitStep) and iri in u.awaits:
                return True
            if isinstance(u, ProposalStep) and u.selects == iri:
                return True
        return False
