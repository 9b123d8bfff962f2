"""A from-scratch fixed point, the reference the incremental engine is checked and benchmarked
against: every rule on every applicable instance, round after round per stratum, until nothing
new is derived. No indexes beyond (subject, property), no truth maintenance.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from app.ontology.model import Ontology, Value
from app.world.aggregate import combine
from app.world.facts import FactKey
from app.world.index import CompiledAggregate, CompiledCondition
from app.world.windows import window_test
from app.world.world import ontology_index

View = dict[tuple[str, str], list[Value]]


def naive_fixpoint(
    onto: Ontology,
    instances: Mapping[str, str],
    base: Iterable[FactKey],
    now: datetime | None = None,
) -> tuple[set[FactKey], list[tuple[str, str]]]:
    """The visible facts over ``base`` (instances map id → class IRI), and the single-valued
    (subject, property) pairs whose values conflict (a transaction over them must fail);
    time windows are measured from ``now``."""
    ix = ontology_index(onto)
    base_set = set(base)
    derived: set[FactKey] = set()

    def anc_of(v: str) -> frozenset[str]:
        cls = instances.get(v)
        if cls is None:
            ind = onto.individuals.get(v)
            cls = ind.class_iri if ind is not None else None
        if cls is None:
            return frozenset()
        return ix.ancestors.get(cls, frozenset((cls,)))

    def view() -> View:
        out: View = {}
        for s, p, v in base_set:
            out.setdefault((s, p), []).append(v)
        cands: dict[tuple[str, str], list[Value]] = {}
        for s, p, v in derived:
            if p in ix.resolved_props:
                cands.setdefault((s, p), []).append(v)
            elif (s, p, v) not in base_set:
                out.setdefault((s, p), []).append(v)
        for (s, p), vals in cands.items():
            order = ix.properties[p].one_of
            win = min(vals, key=lambda x: order.index(x) if x in order else len(order))
            lst = out.setdefault((s, p), [])
            if win not in lst:
                lst.append(win)
        return out

    def reach(v: View, s: str, path: tuple[str, ...]) -> list[Value]:
        frontier: list[Value] = [s]
        for p in path:
            frontier = [x for n in frontier if isinstance(n, str) for x in v.get((n, p), [])]
        return frontier

    def holds(v: View, s: str, cc: CompiledCondition) -> bool:
        reached = reach(v, s, cc.path)
        if cc.negative:
            return not reached
        if cc.timed:
            window = window_test(cc.condition.op, str(cc.condition.value), now)
            return any(window(x) for x in reached)
        return any(cc.test(x, anc_of) for x in reached)

    subjects: dict[int, list[str]] = {}
    for s, cls in instances.items():
        for rid in ix.rules_for_class(cls):
            subjects.setdefault(rid, []).append(s)

    def aggregate(v: View, s: str, agg: CompiledAggregate) -> Value | None:
        kept: dict[Value, None] = {}
        items: list[Value] = []
        for path in agg.over:
            for x in reach(v, s, path):
                if x in kept:
                    continue
                if agg.where and not (
                    isinstance(x, str) and all(holds(v, x, cc) for cc in agg.where)
                ):
                    continue
                kept[x] = None
                if agg.of is None:
                    items.append(x)
                elif isinstance(x, str):
                    items.extend(v.get((x, agg.of), []))
        return combine(agg.function, items, agg.integer)

    for k in ix.strata:
        rules = [r for r in ix.rules if r.stratum == k and r.aggregate is None]
        # an aggregate reads only lower strata: computed once, before the stratum's rules
        current = view()
        for r in ix.rules:
            if r.stratum != k or r.aggregate is None:
                continue
            for s in subjects.get(r.index, ()):
                value = aggregate(current, s, r.aggregate)
                if value is not None:
                    derived.add((s, r.aggregate.property, value))
        changed = True
        while changed:
            changed = False
            current = view()
            for r in rules:
                for s in subjects.get(r.index, ()):
                    if all(holds(current, s, cc) for cc in r.conditions):
                        for p, val in r.conclusions:
                            if (s, p, val) not in derived:
                                derived.add((s, p, val))
                                changed = True
    final = view()
    facts = {(s, p, v) for (s, p), vals in final.items() for v in vals}
    conflicts = [
        sp for sp, vals in final.items() if ix.properties[sp[1]].single_valued and len(vals) > 1
    ]
    return facts, conflicts
