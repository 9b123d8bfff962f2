"""Verification that every class a FHIR mapping produces has a reader.

A coded class that hydration can make an instance of, but that no ``horis:isA`` (of it or an
ancestor) and no reader of the whole property can see, is hydrated on every call and changes
nothing: usually the trace of a renamed rule or class. Readers: conditions anywhere (rules,
requires, goals, branches, cards, system actions, candidates), rules ``horis:about`` the class,
aggregates (their paths and filters), card ``horis:forEach`` (paths and filters) and card
placeholders, ActionStep bindings, narrations, ``horis:decides``,
``horis:selects``, ``horis:cites`` and candidate paths.

A condition that reads the *absence* of a FHIR-mapped property (``horis:isAssigned false``)
depends on what no value means, so that property must say it: ``horis:absentMeans
horis:Unknown`` (a measurement: the conclusion is undecided while the input is incomplete) or
``horis:None`` (a record list: an answered search without a match means there is none).
"""

from __future__ import annotations

from collections.abc import Iterable

from app.ontology._typecheck import TypeChecker
from app.ontology.classes import PropertyDef
from app.ontology.names import local_name
from app.ontology.rules import Condition
from app.ontology.workflows import ActionStep, NarrationStep, ProposalStep

#: the condition operators that test a value for a code (a category, a status, a code)
_CODE_TESTS = frozenset({"is", "in", "inValueSet"})


class ReachChecker(TypeChecker):
    """``run_reach`` reports every coded class a mapping produces that nothing reads, and
    every absence read of a property that does not say what absence means."""

    def run_reach(self) -> None:
        conditions = list(self._conditions())
        whole: set[str] = set(self._whole_readers())
        isa: dict[str, set[str]] = {}  # property -> classes its isA conditions test
        for c in conditions:
            for i, prop in enumerate(c.path):
                last = i == len(c.path) - 1
                if last and c.op == "isA":
                    isa.setdefault(prop, set()).add(str(c.value))
                else:
                    whole.add(prop)
        self._absence(conditions)
        self._record_filters(conditions)
        about = {r.about for r in self.o.rules}
        for p in self.o.properties.values():
            if p.from_fhir and p.is_object and p.iri not in whole:
                self._classes(p, isa.get(p.iri, set()), about)

    def _absence(self, conditions: list[Condition]) -> None:
        readers: dict[str, list[str]] = {}
        for c in conditions:
            if c.op == "isAssigned" and c.value is False:
                for prop in c.path:
                    readers.setdefault(prop, []).append(c.node or "")
        for p, who in self._undeclared(readers, None):
            self.add(
                "absent-means",
                p.iri,
                f"the absence of {p.name} is read (horis:isAssigned false) by "
                f"{who}, so what no value means must be declared: "
                "horis:absentMeans horis:Unknown (a measurement: undecided while the input is "
                "incomplete) or horis:None (a record list: an answered search without a match "
                "means none)",
                "horis:absentMeans",
            )

    def _record_filters(self, conditions: list[Condition]) -> None:
        """A record's element that a condition tests for a code (its category, status, code)
        is false when the record does not carry it, and the record silently drops out: what
        its absence means must be declared, ``horis:Unread`` (a record without it is unread,
        and a decision it could change waits) or ``horis:None`` (a record that does not carry
        it has none, as an encounter without a discharge disposition)."""
        # the classes records are made of: the ranges of the links hydration makes instances for
        records: set[str] = set()
        for link in self.o.properties.values():
            if link.is_object and link.from_fhir:
                records |= {link.range, *self.o.subclasses(link.range)}
        readers: dict[str, list[str]] = {}
        for c in conditions:
            if c.op in _CODE_TESTS:
                readers.setdefault(c.path[-1], []).append(c.node or "")
        for p, who in self._undeclared(readers, records):
            self.add(
                "absent-means",
                p.iri,
                f"{p.name} is a record's element that {who} tests for a code, "
                "so a record without it would drop out unseen: declare what its absence means, "
                "horis:absentMeans horis:Unread (the record is unread and a decision it could "
                "change waits) or horis:None (a record that does not carry it has none)",
                "horis:absentMeans",
            )

    def _undeclared(
        self, readers: dict[str, list[str]], domains: set[str] | None
    ) -> list[tuple[PropertyDef, str]]:
        """The FHIR-mapped properties among ``readers`` (property → the nodes that read it),
        of one of ``domains`` when given, that do not declare what absence means, each with
        who reads it."""
        out: list[tuple[PropertyDef, str]] = []
        for prop, nodes in readers.items():
            p = self.o.properties.get(prop)
            if p is None or not p.from_fhir or p.absent_means is not None:
                continue
            if domains is not None and p.domain not in domains:
                continue
            who = ", ".join(sorted({local_name(n.split(" ", 1)[0]) for n in nodes if n}))
            out.append((p, who or "a condition"))
        return out

    def _classes(self, p: PropertyDef, tested: set[str], about: set[str]) -> None:
        for cls in self._produced(p):
            seen = set(self.o.ancestors(cls))
            if seen & tested or seen & about:
                continue
            tests = ", ".join(sorted(local_name(t) for t in tested)) or "nothing"
            self.add(
                "unread",
                cls,
                f"a FHIR coding of {local_name(cls)} becomes a {p.name} fact, but no condition "
                f"can see it (the horis:isA tests on {p.name} name {tests}): test it or an "
                "ancestor with horis:isA, or remove its horis:code",
                "horis:code",
            )

    def _produced(self, p: PropertyDef) -> Iterable[str]:
        # only classes a code decides: the range itself also takes whatever no code names
        # (any other draft order), which a deployment may rightly ignore
        for cls in self.o.subclasses(p.range):
            node = self.o.classes.get(cls)
            if node is not None and (node.codes or node.value_sets):
                yield cls

    def _conditions(self) -> Iterable[Condition]:
        for r in self.o.rules:
            yield from r.when
        for p in self.o.properties.values():
            if p.aggregate is not None:
                yield from p.aggregate.where
        for step in self.steps.values():
            for _pred, c in step.conditions():
                yield c
            if isinstance(step, ProposalStep) and step.candidates is not None:
                yield from step.candidates.where
            if isinstance(step, ActionStep):
                yield from step.each_where
        for s in self.o.services.values():
            for card in s.cards:
                yield from card.when
                yield from card.each_where
                for suggestion in card.suggestions:
                    yield from suggestion.when
            for action in s.system_actions:
                yield from action.when

    def _whole_readers(self) -> Iterable[str]:
        """Properties read as a whole, whatever class their values have."""
        for p in self.o.properties.values():
            if p.aggregate is not None:  # it reads every value along its paths
                for path in p.aggregate.over:
                    yield from path
                if p.aggregate.of is not None:
                    yield p.aggregate.of
                for relation in (p.aggregate.dated, p.aggregate.sharing):
                    if relation is not None:
                        yield relation.property
                        yield relation.anchor
                span = p.aggregate.span
                if span is not None:
                    yield from (q for q in (span.start, span.end, span.length) if q is not None)
        for w in self.o.workflows.values():
            if w.decides is not None:
                yield w.decides
        for step in self.steps.values():
            if isinstance(step, ActionStep):
                yield from (b.property for b in step.bindings if b.property is not None)
                for path in step.for_each:
                    yield from path
            elif isinstance(step, NarrationStep) and step.narrates is not None:
                yield step.narrates
            elif isinstance(step, ProposalStep):
                if step.selects is not None:
                    yield step.selects
                if step.candidates is not None:
                    yield from step.candidates.path
        for s in self.o.services.values():
            for card in s.cards:
                yield from (x.cites for x in card.suggestions if x.cites is not None)
                for path in card.for_each:
                    yield from path
                yield from (iri for _name, iri in card.variables)
                for _name, steps in card.paths:
                    for prop, where in steps:
                        yield prop
                        if where is not None:
                            yield where
            yield from (a.cites for a in s.system_actions if a.cites is not None)
