"""When a FHIR resource was taken, and ages measured from a FHIR date, for hydration.

Pure: ``now`` is always given (the hook's time), never read from a clock.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

from app.fhir_time import parse_datetime

_TIME_PATHS = (
    ("effectiveDateTime",),
    ("effectiveInstant",),
    ("effectivePeriod", "end"),
    ("effectivePeriod", "start"),
    ("issued",),
    ("recordedDate",),
    ("onsetDateTime",),
    ("authoredOn",),
    ("meta", "lastUpdated"),
)


def effective(resource: Mapping[str, Any]) -> str:
    """When the resource was taken (or else recorded, or last updated): the first of those
    times it carries, as written; empty when it carries none."""
    for path in _TIME_PATHS:
        node: Any = resource
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, str):
            return node
    return ""


#: Older than any FHIR instant, 0001-01-01T00:00:00+14:00 included (FHIR offsets stop at
#: ±14:00), so that no dated reading is ever taken for an undated one.
UNDATED = datetime.min.replace(tzinfo=timezone(timedelta(hours=23, minutes=59)))


def when_key(text: str) -> datetime:
    """Effective times compare as instants; a date-only value counts as its midnight UTC (for
    ``horis:maxAge`` too: a reading of that day counts as taken at its start), an undated
    one as older than any other, a leap second as the last instant of its minute."""
    parsed = parse_datetime(text)
    if parsed is None:
        return UNDATED
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


_FHIR_DATE = re.compile(r"(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T.+)?)?)?")


def latest_day(text: str) -> date:
    """The last day a FHIR ``date`` (or ``dateTime``) can mean: ``1960-06`` → 1960-06-30,
    ``1960`` → 1960-12-31. A value that is not a FHIR date raises ``ValueError``."""
    found = _FHIR_DATE.fullmatch(text)
    if found is None:
        raise ValueError(f"{text!r} is not a FHIR date")
    year, month, day = found.groups()
    y, m = int(year), int(month or 12)
    if not 1 <= m <= 12:
        raise ValueError(f"{text!r} is not a FHIR date")
    return date(y, m, int(day) if day else calendar.monthrange(y, m)[1])


def years_since(born: str, now: datetime) -> int:
    """Whole years from ``born`` to ``now``. A partial date counts from the latest day it can
    mean, so the result is never older than the person can be."""
    d = latest_day(born)
    today = now.date()
    return today.year - d.year - ((today.month, today.day) < (d.month, d.day))
