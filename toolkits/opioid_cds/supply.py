"""Days of supply of a medication order, as the guide's routines read them.

- ``supply_days``: ``dispenseRequest.expectedSupplyDuration`` in days, by its UCUM code
  (``a`` 365 days, ``mo`` 30, ``wk`` 7, ``d`` 1, ``h`` 1/24, ``min``, ``s``, ``ms``), compared
  case-insensitively as the reference's ``~`` does;
- ``validity_days``: whole days between ``dispenseRequest.validityPeriod.start`` and ``.end``;
- ``supply_end``: the day the supply runs out: the authored day plus the whole days of supply
  (the guide's "prescription relevant period" ends there).

These are computations; whether 28 days make a prescription subacute or chronic is a rule of
the deployment.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from app.fhir_time import parse_datetime
from app.world.windows import add_days

_DAYS_PER_UNIT: dict[str, Decimal] = {
    "a": Decimal(365),
    "mo": Decimal(30),
    "wk": Decimal(7),
    "d": Decimal(1),
    "h": Decimal(1) / Decimal(24),
    "min": Decimal(1) / Decimal(1440),
    "s": Decimal(1) / Decimal(86400),
    "ms": Decimal(1) / Decimal(86400000),
}
_DAY_PRECISION = re.compile(r"\d{4}-\d{2}-\d{2}")


def supply_days(value: Decimal | None, unit: str | None) -> Decimal | None:
    """The supply duration in days; None when the value or a known time unit is missing."""
    if value is None or unit is None:
        return None
    per = _DAYS_PER_UNIT.get(unit.strip().lower())
    if per is None or value < 0:
        return None
    return value * per


def _instant(text: str) -> datetime | None:
    """A FHIR dateTime of at least day precision as an aware instant (no zone: UTC)."""
    if not _DAY_PRECISION.match(text):
        return None
    parsed = parse_datetime(text)
    if parsed is None:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def validity_days(start: str | None, end: str | None) -> int | None:
    """Whole days from ``start`` to ``end`` (truncated toward zero); None when either is missing
    or coarser than a day."""
    if start is None or end is None:
        return None
    begin, finish = _instant(start), _instant(end)
    if begin is None or finish is None:
        return None
    return int((finish - begin) / timedelta(days=1))


def supply_end(authored_on: str | None, days: Decimal | None) -> date | None:
    """The authored day plus the whole days of supply (a fraction of a day does not count)."""
    if authored_on is None or days is None or not _DAY_PRECISION.match(authored_on):
        return None
    return add_days(date.fromisoformat(authored_on[:10]), int(days))
