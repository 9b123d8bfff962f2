"""Time windows relative to the run's time (``now``): the operators ``withinPast``,
``atMostAgo`` and ``atLeastAgo``.

Clinical look-back windows count calendar days ("authored in the past 90 days", "at least 24
hours ago" read as "before today"), so a window compares the calendar day of a value with the
calendar day a duration before ``now``:

- ``withinPast D``: the day of ``now − D`` ≤ the value's day ≤ the day of ``now``;
- ``atMostAgo D``: the value's day ≥ the day of ``now − D`` (it may lie in the future);
- ``atLeastAgo D``: the value's day ≤ the day of ``now − D``.

A value's day is its date as written (a dateTime keeps its own offset: ``2023-05-01T00:00-06:00``
is the 1st of May); ``now``'s day is its date in its own offset (the hook's time is UTC). Years
and months move the calendar (the 29th of February less a year is the 28th); days, hours,
minutes and seconds move the instant before its day is taken. Nothing here reads a clock:
``now`` is given to the World by whoever runs it.
"""

from __future__ import annotations

import calendar
from collections.abc import Callable
from datetime import date, datetime, timedelta
from functools import lru_cache

from app.fhir_time import parse_datetime
from app.ontology.durations import CalendarDuration, parse_window
from app.ontology.model import Value

WINDOW_OPERATORS = frozenset({"withinPast", "atMostAgo", "atLeastAgo"})

#: test(value) for one reached value
WindowTest = Callable[[Value], bool]


def day_before(duration: CalendarDuration, now: datetime) -> date:
    """The calendar day ``duration`` before ``now``."""
    day = (now - timedelta(days=duration.days, seconds=duration.seconds)).date()
    months = day.month - 1 - duration.months - 12 * duration.years
    year, month = day.year + months // 12, months % 12 + 1
    return date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def add_days(day: date, days: int) -> date:
    """``day`` plus ``days``, held to the calendar: a span that would end after 9999-12-31 (or
    begin before 0001-01-01) reaches the calendar's edge, which is as far as any window can
    see, rather than failing the run."""
    if days >= (date.max - day).days:
        return date.max
    if days <= (date.min - day).days:
        return date.min
    return day + timedelta(days=days)


@lru_cache(maxsize=4096)
def day_of(value: str) -> date | None:
    """The calendar day an ISO 8601 date or date-time names, as written."""
    if "T" in value:
        parsed = parse_datetime(value)
        return parsed.date() if parsed is not None else None
    try:
        return date.fromisoformat(value)
    except ValueError:
        return None


def window_test(op: str, operand: str, now: datetime | None) -> WindowTest:
    """The predicate a reached value must satisfy for ``op`` at ``now``. Without a time (a World
    built with no ``now``) no value is inside any window."""
    duration = parse_window(operand)
    if now is None or duration is None:
        return lambda v: False
    bound = day_before(duration, now)
    today = now.date()
    if op == "withinPast":
        return lambda v: (d := _day(v)) is not None and bound <= d <= today
    if op == "atMostAgo":
        return lambda v: (d := _day(v)) is not None and d >= bound
    if op == "atLeastAgo":
        return lambda v: (d := _day(v)) is not None and d <= bound
    raise ValueError(f"unknown window operator {op}")


def _day(v: Value) -> date | None:
    return day_of(v) if isinstance(v, str) else None
