"""Doses per day from a FHIR ``Timing.repeat``: the frequency part of the MME calculation.

The guide's calculator takes ``frequencyMax`` when given (the most aggressive reading), else
``frequency``, per ``period`` ``periodUnit``; without them it counts ``timeOfDay`` entries.
Where the reference yields nothing usable this module says so (``None`` and a reason) instead of
the reference's silent 0 doses per day; see docs/opioid-cds.md, "MME".
"""

from __future__ import annotations

from decimal import Decimal

#: Doses per day of one dose per 1 <unit>: UCUM codes and the spelled-out units the guide's
#: calculator also accepts.
_PER_DAY: dict[str, Decimal] = {}
for _names, _per_day in (
    (("s", "second", "seconds"), Decimal(86400)),
    (("min", "minute", "minutes"), Decimal(1440)),
    (("h", "hour", "hours"), Decimal(24)),
    (("d", "day", "days"), Decimal(1)),
    (("wk", "week", "weeks"), Decimal(1) / Decimal(7)),
    (("mo", "month", "months"), Decimal(1) / Decimal(30)),  # a month counts 30 days
    (("a", "year", "years"), Decimal(1) / Decimal(365)),  # a year counts 365 days
):
    for _name in _names:
        _PER_DAY[_name] = _per_day


def doses_per_day(
    *,
    frequency: int | None,
    frequency_max: int | None,
    period: Decimal | None,
    period_unit: str | None,
    times_of_day: int | None,
) -> tuple[Decimal | None, str]:
    """(doses per day, how it was read); None when the timing does not say.

    - ``frequencyMax`` (else ``frequency``) per ``period`` ``periodUnit``;
    - else the number of ``timeOfDay`` entries;
    - else a ``period`` without a frequency means once per period (FHIR's meaning of a missing
      ``frequency``);
    - else unknown.
    """
    times = frequency_max if frequency_max is not None else frequency
    if period is not None or period_unit is not None:
        if period is None or period <= 0:
            return None, f"the timing period {period!r} is not a positive number"
        per_unit = _PER_DAY.get(period_unit or "")
        if per_unit is None:
            return None, f"the timing period unit {period_unit!r} is not a unit of time"
        if times is not None:
            if times < 0:
                return None, f"the timing frequency {times} is negative"
            return Decimal(times) * per_unit / period, f"{times} per {period} {period_unit}"
        if times_of_day:
            return Decimal(times_of_day), f"{times_of_day} times of day"
        return per_unit / period, f"once per {period} {period_unit} (no frequency given)"
    if times_of_day:
        return Decimal(times_of_day), f"{times_of_day} times of day"
    return None, "the dosage has no timing (no period and no times of day)"
