"""Time windows relative to the run's time (``now``): the operators ``withinPast``,
``atMostAgo`` and ``atLeastAgo``.

Clinical look-back windows count calendar days ("authored in the past 90 days", "at least 24
hours ago" read as "before today"), so a window compares the calendar day of a value with the
calendar day a duration before ``now``:

- ``withinPast D``: the day of ``now − D`` ≤ the value's day ≤ the day of ``now``;
- ``atMostAgo D``: the value's day ≥ the day of ``now − D`` (it may lie in the future);
- ``atLeastAgo D``: the value's day ≤ the day of ``now − D``.

A value's day is its date as written (a dateTime keeps its own offset; ``2023-05-01T00:00-06:00``
is the 1st of May); ``now``'s day is its date in its own offset (the hook's time is UTC).
Durations are ISO 8601 (``P90D``, ``P2Y``, ``P12M``, ``P1W``, ``PT24H``); years and months move the
calendar (the 29th of February less a year is the 28th), hours, minutes and seconds move the
instant before its day is taken. Nothing here reads a clock: ``now`` is given.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import lru_cache

from app.ontology.model import Value

TEMPORAL_OPERATORS = frozenset({"withinPast", "atMostAgo", "atLeastAgo"})

#: test(value) for one reached value
WindowTest = Callable[[Value], bool]

_DURATION = re.compile(
    r"^P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$"
)


@dataclass(frozen=True)
class CalendarDuration:
    """An ISO 8601 duration split into calendar parts and an exact part."""

    years: int = 0
    months: int = 0
    days: int = 0
    seconds: int = 0

    def before(self, now: datetime) -> date:
        """The calendar day this long before ``now``."""
        instant = now - timedelta(days=self.days, seconds=self.seconds)
        day = instant.date()
        months = day.month - 1 - self.months - 12 * self.years
        year, month = day.year + months // 12, months % 12 + 1
        return date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


@lru_cache(maxsize=256)
def parse_window(text: str) -> CalendarDuration | None:
    """An ISO 8601 duration of whole units (``P90D``, ``P1Y6M``, ``PT24H``), or None."""
    found = _DURATION.match(text.strip())
    if found is None or text.strip() in ("P", "PT") or text.strip().endswith("T"):
        return None
    y, mo, w, d, h, mi, s = (int(g) if g else 0 for g in found.groups())
    return CalendarDuration(years=y, months=mo, days=d + 7 * w, seconds=h * 3600 + mi * 60 + s)


@lru_cache(maxsize=4096)
def day_of(value: str) -> date | None:
    """The calendar day an ISO 8601 date or date-time names, as written."""
    try:
        if "T" in value:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).date()
        return date.fromisoformat(value)
    except ValueError:
        return None


def window_test(op: str, duration: CalendarDuration, now: datetime) -> WindowTest:
    """The predicate a reached value must satisfy for ``op`` at ``now``."""
    bound = duration.before(now)
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
