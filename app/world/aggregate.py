"""Aggregates: Count, Sum, Min, Max and DaysCovered over what a property's ``horis:aggregate``
reaches.

The engine treats an aggregate as an activation of a synthetic rule about the property's domain
(``index.CompiledAggregate``): its witness is every fact it read — the path to each kept value,
the premises of the filters that kept it, and the values of ``of`` it combined — so the proof
shows what was counted or summed, and a change to any of them (or a new value reached) dirties
it. Because it reads its inputs complete it sits in a stratum above all of them; recomputing it
then is exact, and an activation whose recomputation differs is replaced (truth maintenance).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Protocol, TypeAlias

from app.ontology.durations import CalendarDuration, parse_window
from app.ontology.model import DatedDef, SharingDef, SpanDef, Value
from app.world.facts import FactKey
from app.world.store import Chain, Store
from app.world.values import compare, is_number
from app.world.windows import add_days, day_before, day_of

if TYPE_CHECKING:
    from app.world.index import CompiledAggregate, CompiledCondition

#: (premises, absences, computed conclusions or None for a rule): what an evaluation returns
Witness: TypeAlias = tuple[
    Chain, tuple[tuple[str, tuple[str, ...]], ...], tuple[tuple[str, Value], ...] | None
]


class Reads(Protocol):
    """What an aggregate reads of the engine evaluating it (``app.world.engine.Engine``): the
    store, the run's time, and the chain of facts to a condition's value."""

    st: Store
    now: datetime | None

    def chain(self, s: str, cc: CompiledCondition) -> Chain | None: ...


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


def aggregate_witness(engine: Reads, s: str, agg: CompiledAggregate) -> Witness | None:
    """The value of ``agg`` on subject ``s`` with every fact it read, or None when it has no
    value (a Min or Max of nothing)."""
    st = engine.st
    premises: list[FactKey] = []
    absent: list[tuple[str, tuple[str, ...]]] = []
    items: list[Value] = []
    spans: list[tuple[date, date]] = []
    kept: dict[Value, None] = {}
    for path in agg.over:
        for value, chain in _reach(engine, s, path):
            if value in kept:
                continue
            filters = _filters(engine, value, agg)
            if filters is None:
                continue
            if agg.dated is not None:
                dated = _dated(engine, s, value, agg.dated)
                if dated is None:
                    continue
                filters[0].extend(dated)
            if agg.sharing is not None:
                shared = _sharing(engine, s, value, agg.sharing)
                if shared is None:
                    continue
                filters[0].extend(shared)
            kept[value] = None
            premises.extend(chain)
            premises.extend(filters[0])
            absent.extend(filters[1])
            if agg.span is not None:
                span = _span(engine, value, agg.span, premises)
                if span is not None:
                    spans.append(span)
            elif agg.of is None:
                items.append(value)
            elif isinstance(value, str):
                for v in st.values(value, agg.of):
                    premises.append((value, agg.of, v))
                    items.append(v)
    result: Value | None
    if agg.span is not None:
        result = _covered(spans, agg.span, engine.now)
    else:
        result = combine(agg.function, items, agg.integer)
    if result is None:
        return None
    return (
        tuple(dict.fromkeys(premises)),
        tuple(dict.fromkeys(absent)),
        ((agg.property, result),),
    )


def _span(
    engine: Reads, value: Value, span: SpanDef, premises: list[FactKey]
) -> tuple[date, date] | None:
    """The first and last day of the span of the instance ``value`` (its earliest start, and its
    latest end or its start plus its longest length in whole days), recording the facts read;
    None when it has no start or no end."""
    if not isinstance(value, str) or isinstance(value, bool):
        return None
    starts = [(v, d) for v in engine.st.values(value, span.start) if (d := _day(v)) is not None]
    if not starts:
        return None
    start_value, first = min(starts, key=lambda item: item[1])
    last: date | None = None
    end_fact: FactKey | None = None
    if span.end is not None:
        for v in engine.st.values(value, span.end):
            d = _day(v)
            if d is not None and (last is None or d > last):
                last, end_fact = d, (value, span.end, v)
    elif span.length is not None:
        for v in engine.st.values(value, span.length):
            if not is_number(v) or isinstance(v, bool):
                continue
            d = add_days(first, int(Decimal(v)))
            if last is None or d > last:
                last, end_fact = d, (value, span.length, v)
    if last is None or end_fact is None:
        return None
    premises.append((value, span.start, start_value))
    premises.append(end_fact)
    return first, last


def _day(v: Value) -> date | None:
    return day_of(v) if isinstance(v, str) and not isinstance(v, bool) else None


def outside_window(engine: Reads, value: Value, span: SpanDef) -> bool:
    """Whether the instance ``value``'s span lies wholly outside a ``DaysCovered`` window: it
    covers none of its days, whatever else is known of it. False when its span is not known
    (no start, no end) or there is no time."""
    if engine.now is None:
        return False
    found = _span(engine, value, span, [])
    if found is None:
        return False
    low, high = _window(span, engine.now)
    first, last = found
    return max(first, low) > min(last, high)


def _window(span: SpanDef, now: datetime) -> tuple[date, date]:
    low = day_before(parse_window(span.window_from) or CalendarDuration(), now)
    high = day_before(parse_window(span.window_to) or CalendarDuration(), now)
    return low, high


def _covered(spans: list[tuple[date, date]], span: SpanDef, now: datetime | None) -> int:
    """Days of the window covered by ``spans``: each span clipped to the window, spans that
    overlap or meet (one ends the day before the next begins) merged, and each merged span
    counting its last day minus its first. Without a time no day is in the window."""
    if now is None:
        return 0
    low, high = _window(span, now)
    clipped = sorted(
        (max(first, low), min(last, high))
        for first, last in spans
        if max(first, low) <= min(last, high)
    )
    total = 0
    current: tuple[date, date] | None = None
    for first, last in clipped:
        if current is not None and first <= current[1] + timedelta(days=1):
            current = (current[0], max(current[1], last))
            continue
        if current is not None:
            total += (current[1] - current[0]).days
        current = (first, last)
    if current is not None:
        total += (current[1] - current[0]).days
    return total


def _dated(engine: Reads, s: str, value: Value, dated: DatedDef) -> list[FactKey] | None:
    """The facts by which ``value`` is dated within the window before one of the subject's
    anchor days, or None when it is not."""
    if not isinstance(value, str) or isinstance(value, bool):
        return None
    start = parse_window(dated.window_from) or CalendarDuration()
    end = parse_window(dated.window_to) or CalendarDuration()
    for a in engine.st.values(s, dated.anchor):
        anchor = _day(a)
        if anchor is None:
            continue
        at = datetime.combine(anchor, time())
        low, high = day_before(start, at), day_before(end, at)
        for v in engine.st.values(value, dated.property):
            d = _day(v)
            if d is not None and low <= d <= high:
                return [(s, dated.anchor, a), (value, dated.property, v)]
    return None


def _sharing(engine: Reads, s: str, value: Value, sharing: SharingDef) -> list[FactKey] | None:
    """The facts by which ``value`` has a value of its property equal to one of the subject's
    anchor values, or None when it has none."""
    if not isinstance(value, str) or isinstance(value, bool):
        return None
    anchors = set(engine.st.values(s, sharing.anchor))
    for v in engine.st.values(value, sharing.property):
        if v in anchors:
            return [(s, sharing.anchor, v), (value, sharing.property, v)]
    return None


def _reach(engine: Reads, s: str, path: tuple[str, ...]) -> list[tuple[Value, Chain]]:
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
    engine: Reads, value: Value, agg: CompiledAggregate
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
