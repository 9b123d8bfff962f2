"""Move the dates of a CDC opioid guide example request to a chosen day.

The guide's examples were written for a day of their own: each resource may carry the extension
``http://fhir.org/guides/cdc/opioid-cds/StructureDefinition/dataDateRoller`` whose
``dateLastUpdated`` names that day. Rolling shifts every ``date`` and ``dateTime`` text inside a
resource (contained resources and nested elements included) by the days from its
``dateLastUpdated`` to the target day, so "7 of the past 10 days" still holds whenever the test
runs. A resource without the extension moves with the request's most common ``dateLastUpdated``;
a request where no resource carries one is returned unchanged. Bundles are not resources of
their own here: their entries roll one by one. Times of day and zone offsets are kept; partial
dates (``2023-05``, ``2023``) and anything else are left as they are. Only ``context`` and
``prefetch`` hold data; the rest of the request is copied.

Prefetch keys that a guide file left at the top level of the request (``item2``…) are moved
back into ``prefetch`` first.

``roll(request, today)`` returns a rolled deep copy; the input is not changed. As a command:
``python -m tests.support.date_roller REQUEST.json [YYYY-MM-DD] > ROLLED.json`` (default: today,
UTC).
"""

from __future__ import annotations

import copy
import json
import re
import sys
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

ROLLER_URL = "http://fhir.org/guides/cdc/opioid-cds/StructureDefinition/dataDateRoller"
_STRAY_KEY = re.compile(r"item\d+")
_DATE_TEXT = re.compile(r"(\d{4}-\d{2}-\d{2})(T[0-9:.]+(?:Z|[+-]\d{2}:\d{2})?)?")


def written_for(resource: dict[str, Any]) -> date | None:
    """The ``dateLastUpdated`` of a resource's roller extension, if it has one."""
    for extension in resource.get("extension") or []:
        if not isinstance(extension, dict) or extension.get("url") != ROLLER_URL:
            continue
        for part in extension.get("extension") or []:
            if isinstance(part, dict) and part.get("url") == "dateLastUpdated":
                return date.fromisoformat(str(part.get("valueDateTime"))[:10])
    return None


def _every_resource(node: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "resourceType" in item:
                found.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _shifted(value: Any, by: timedelta) -> Any:
    """``value`` with every date text moved by ``by`` days."""
    if isinstance(value, dict):
        return {key: _shifted(item, by) for key, item in value.items()}
    if isinstance(value, list):
        return [_shifted(item, by) for item in value]
    if isinstance(value, str):
        match = _DATE_TEXT.fullmatch(value)
        if match is not None:
            day = date.fromisoformat(match.group(1)) + by
            return day.isoformat() + (match.group(2) or "")
    return value


def _roll(node: Any, today: date, fallback: timedelta) -> Any:
    if isinstance(node, list):
        return [_roll(item, today, fallback) for item in node]
    if not isinstance(node, dict):
        return node
    if "resourceType" in node and node["resourceType"] != "Bundle":
        own = written_for(node)
        return _shifted(node, today - own if own is not None else fallback)
    return {key: _roll(item, today, fallback) for key, item in node.items()}


def roll(request: dict[str, Any], today: date) -> dict[str, Any]:
    """A deep copy of ``request`` with its data moved to ``today``."""
    moved = copy.deepcopy(request)
    stray = [key for key in moved if _STRAY_KEY.fullmatch(key)]
    if stray:
        prefetch = dict(moved.get("prefetch") or {})
        for key in stray:
            prefetch[key] = moved.pop(key)
        moved["prefetch"] = prefetch
    days = Counter(
        day
        for resource in _every_resource([moved.get("context"), moved.get("prefetch")])
        if (day := written_for(resource)) is not None
    )
    if not days:
        return moved
    fallback = today - days.most_common(1)[0][0]
    for key in ("context", "prefetch"):
        if key in moved:
            moved[key] = _roll(moved[key], today, fallback)
    return moved


if __name__ == "__main__":
    source = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    day = date.fromisoformat(sys.argv[2]) if len(sys.argv) > 2 else datetime.now(UTC).date()
    json.dump(roll(source, day), sys.stdout, indent=1)
    sys.stdout.write("\n")
