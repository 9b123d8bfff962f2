"""Readings that are not one exact number: a bound (``<30``), and readings that disagree.

A Quantity with a ``comparator`` says the value lies somewhere in an interval (``<30``: below
30). The rules compare numbers, so such a reading may be read only when every condition the
deployment has on that property gives the same answer for every value of the interval; it is
then read as one value inside it (:func:`representative`), and otherwise refused. Two readings
of one property taken at the same instant are read as one only when every condition gives the
same answer for both (:func:`same_answers`).

The conditions are the deployment's own (``Ontology.conditions_on``): rules, goals, branches
and cards. Conditions on other properties, and operators that do not read the number itself
(``isAssigned``), do not depend on which value of the interval it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from app.ontology.model import Condition
from app.world.values import make_test, to_decimal

#: Operators whose answer depends on the number read.
_NUMERIC = frozenset({"is", "isNot", "in", "notIn", "greaterThan", "atLeast", "lessThan", "atMost"})
COMPARATORS = frozenset({"<", "<=", ">", ">="})


def _no_class(_value: str) -> frozenset[str]:
    return frozenset()


def _answers(conditions: Sequence[Condition], value: Decimal) -> tuple[bool, ...]:
    return tuple(make_test(c.op, c.value)(value, _no_class) for c in conditions if c.op in _NUMERIC)


def same_answers(conditions: Sequence[Condition], values: Sequence[Decimal]) -> bool:
    """Whether every condition answers alike for each of ``values``."""
    return len({_answers(conditions, v) for v in values}) <= 1


def _thresholds(conditions: Sequence[Condition]) -> list[Decimal]:
    out: list[Decimal] = []
    for c in conditions:
        if c.op not in _NUMERIC:
            continue
        for v in c.value if isinstance(c.value, tuple) else (c.value,):
            try:
                out.append(to_decimal(v))
            except ValueError:
                continue
    return out


def _step(bound: Decimal) -> Decimal:
    """A tenth of the bound's last written digit: ``30`` → ``0.1``, ``0.5`` → ``0.01``."""
    exponent = bound.as_tuple().exponent
    places = -exponent if isinstance(exponent, int) and exponent < 0 else 0
    return Decimal(1).scaleb(-(places + 1))


def _inside(comparator: str, bound: Decimal, v: Decimal) -> bool:
    return {
        "<": v < bound,
        "<=": v <= bound,
        ">": v > bound,
        ">=": v >= bound,
    }[comparator]


def representative(
    conditions: Sequence[Condition], comparator: str, bound: Decimal
) -> Decimal | None:
    """One value inside the interval ``comparator bound`` that every condition answers as it
    answers every other value of the interval; None when some condition's answer depends on
    where in the interval the value is (the bound does not decide)."""
    step = _step(bound)
    below = comparator in ("<", "<=")
    far = bound - Decimal(10) ** 9 if below else bound + Decimal(10) ** 9
    near = bound if comparator in ("<=", ">=") else (bound - step if below else bound + step)
    samples = [near, far]
    for t in _thresholds(conditions):
        s = min(step, _step(t))
        for point in (t - s, t, t + s):
            if _inside(comparator, bound, point):
                samples.append(point)
    if not same_answers(conditions, samples):
        return None
    return near
