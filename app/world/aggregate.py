"""Aggregates: Count, Sum, Min and Max over the values a property's ``horis:aggregate`` reaches.

The engine treats an aggregate as an activation of a synthetic rule about the property's domain
(``index.CompiledAggregate``): its witness is every fact it read — the path to each kept value,
the premises of the filters that kept it, and the values of ``of`` it combined — so the proof
shows what was counted or summed, and a change to any of them (or a new value reached) dirties
it. Because it reads its inputs complete it sits in a stratum above all of them; recomputing it
then is exact, and an activation whose recomputation differs is replaced (truth maintenance).
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import TYPE_CHECKING, TypeAlias

from app.ontology.model import Value
from app.world.facts import FactKey
from app.world.store import Chain
from app.world.values import compare, is_number

if TYPE_CHECKING:
    from app.world.engine import Engine
    from app.world.index import CompiledAggregate

#: (premises, absences, computed conclusions or None for a rule): what an evaluation returns
Witness: TypeAlias = tuple[
    Chain, tuple[tuple[str, tuple[str, ...]], ...], tuple[tuple[str, Value], ...] | None
]


def combine(function: str, items: Iterable[Value], integer: bool) -> Value | None:
    """The aggregate of ``items``: Count and Sum of nothing are 0; Min and Max of nothing are
    None (unassigned). Values that cannot take part (a text in a Sum) are left out."""
    values = list(items)
    if function == "Count":
        return len(values)
    if function == "Sum":
        total = sum((Decimal(v) for v in values if is_number(v)), Decimal(0))
        if integer and total == total.to_integral_value():
            return int(total)
        return total
    best: Value | None = None
    for v in values:
        if best is None:
            best = v
            continue
        order = compare(v, best)
        if order is not None and (order < 0 if function == "Min" else order > 0):
            best = v
    return best


def aggregate_witness(engine: Engine, s: str, agg: CompiledAggregate) -> Witness | None:
    """The value of ``agg`` on subject ``s`` with every fact it read, or None when it has no
    value (a Min or Max of nothing)."""
    st = engine.st
    premises: list[FactKey] = []
    absent: list[tuple[str, tuple[str, ...]]] = []
    items: list[Value] = []
    kept: dict[Value, None] = {}
    for path in agg.over:
        for value, chain in _reach(engine, s, path):
            if value in kept:
                continue
            filters = _filters(engine, value, agg)
            if filters is None:
                continue
            kept[value] = None
            premises.extend(chain)
            premises.extend(filters[0])
            absent.extend(filters[1])
            if agg.of is None:
                items.append(value)
            elif isinstance(value, str):
                for v in st.values(value, agg.of):
                    premises.append((value, agg.of, v))
                    items.append(v)
    result = combine(agg.function, items, agg.integer)
    if result is None:
        return None
    return (
        tuple(dict.fromkeys(premises)),
        tuple(dict.fromkeys(absent)),
        ((agg.property, result),),
    )


def _reach(engine: Engine, s: str, path: tuple[str, ...]) -> list[tuple[Value, Chain]]:
    """Every value at the end of ``path`` from ``s`` with the chain of facts that reaches it."""
    frontier: list[tuple[Value, Chain]] = [(s, ())]
    for p in path:
        step: list[tuple[Value, Chain]] = []
        for node, chain in frontier:
            if not isinstance(node, str) or isinstance(node, bool):
                continue
            for v in engine.st.values(node, p):
                step.append((v, (*chain, (node, p, v))))
        frontier = step
    return frontier


def _filters(
    engine: Engine, value: Value, agg: CompiledAggregate
) -> tuple[list[FactKey], list[tuple[str, tuple[str, ...]]]] | None:
    """The premises and absences by which ``value`` passes every ``where`` condition, or None."""
    if not agg.where:
        return [], []
    if not isinstance(value, str) or isinstance(value, bool):
        return None
    premises: list[FactKey] = []
    absent: list[tuple[str, tuple[str, ...]]] = []
    for cc in agg.where:
        if cc.negative:
            if engine.st.reaches_any(value, cc.path):
                return None
            absent.append((value, cc.path))
        else:
            chain = engine.chain(value, cc)
            if chain is None:
                return None
            premises.extend(chain)
    return premises, absent
