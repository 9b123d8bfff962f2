"""FHIR's date-time text as Python reads it: the one parser hydration, the World's date values
and windows, and the clinician's text share.

FHIR's grammar admits what Python's ``fromisoformat`` does not: a leap second (``23:59:60``),
read here as the last instant of its minute (``23:59:59.999999``), so that it keeps its place
among other times and is never mistaken for an undated one.
"""

from __future__ import annotations

import re
from datetime import datetime

__all__ = ["parse_datetime"]

_LEAP_SECOND = re.compile(r"(T\d{2}:\d{2}):60(?=[.Z+-]|$)")


def parse_datetime(text: str) -> datetime | None:
    """A FHIR ``dateTime`` or ``instant`` with a time (or a bare ``YYYY-MM-DD``) as a datetime,
    aware when it carries an offset or ``Z``; None for anything else (a partial date too)."""
    leap = _LEAP_SECOND.search(text)
    if leap is not None:
        text = f"{text[: leap.start()]}{leap.group(1)}:59{text[leap.end() :]}"
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.replace(microsecond=999_999) if leap is not None else parsed
