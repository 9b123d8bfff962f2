"""ISO 8601 durations for time windows: how far back ``withinPast``/``atMostAgo``/``atLeastAgo``
reach (``app.world.windows``). Whole units only; years and months are calendar units, so they
stay apart from the exact part."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

_WINDOW = re.compile(
    r"^P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$"
)


@dataclass(frozen=True)
class CalendarDuration:
    """An ISO 8601 duration split into calendar parts (years, months, days) and an exact part
    (seconds)."""

    years: int = 0
    months: int = 0
    days: int = 0
    seconds: int = 0


@lru_cache(maxsize=256)
def parse_window(text: str) -> CalendarDuration | None:
    """``P90D``, ``P2Y``, ``P1Y6M``, ``P1W``, ``PT24H`` (whole numbers of each unit), or None."""
    text = text.strip()
    found = _WINDOW.match(text)
    if found is None or text in ("P", "PT") or text.endswith("T"):
        return None
    y, mo, w, d, h, mi, s = (int(g) if g else 0 for g in found.groups())
    return CalendarDuration(years=y, months=mo, days=d + 7 * w, seconds=h * 3600 + mi * 60 + s)
