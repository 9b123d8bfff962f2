"""Following FHIR references during hydration: contained resources, resources read in the same
call, and the values read from them.

A ``Reference`` names its target as ``#id`` (a resource contained in the one that refers to it),
``Type/id`` or an absolute URL ending in ``Type/id`` (optionally ``/_history/N``), or as the
``fullUrl`` of a Bundle entry the call received (``urn:uuid:…``, as transaction Bundles write
them). A target that
is neither contained nor among the resources the call read is not followed: hydration never
reads from the network, the prefetch (or the service's own reads) must bring it, e.g. with
``_include=MedicationRequest:medication``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date
from typing import Any

from app.fhir_time import parse_datetime

_TYPE_ID = re.compile(r"(?:^|/)([A-Z][A-Za-z]+)/([A-Za-z0-9\-.]{1,64})$")


def reference_key(reference: str) -> tuple[str, str] | None:
    """``(type, id)`` named by a relative or absolute reference, or None."""
    plain = reference.split("/_history/", 1)[0]
    found = _TYPE_ID.search(plain)
    return (found.group(1), found.group(2)) if found else None


def resolve(
    container: Mapping[str, Any],
    value: Any,
    known: Mapping[tuple[str, str], Mapping[str, Any]],
    by_url: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[Mapping[str, Any], Mapping[str, Any]] | None:
    """The resource a ``Reference`` value names, and the resource that stands for it in the
    source-version vector (the container for a contained resource, else the target itself).
    ``by_url``: the resources of the call's Bundles by ``fullUrl``, which a reference may name
    as written (``urn:uuid:…``)."""
    if not isinstance(value, Mapping):
        return None
    ref = value.get("reference")
    if not isinstance(ref, str) or not ref:
        return None
    if ref.startswith("#"):
        for inner in container.get("contained") or []:
            if isinstance(inner, Mapping) and inner.get("id") == ref[1:]:
                return inner, container
        return None
    key = reference_key(ref)
    target = known.get(key) if key is not None else None
    if target is None and by_url is not None:
        target = by_url.get(ref)
    return (target, target) if target is not None else None


def calendar_date(text: str) -> date | None:
    """The calendar day a FHIR date or dateTime names, as written (its own offset kept)."""
    if "T" in text:
        parsed = parse_datetime(text)
        return parsed.date() if parsed is not None else None
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def period_days(period: Any) -> int | None:
    """Whole days from a Period's start to its end (calendar days as written); None when either
    end is missing or not a date."""
    if not isinstance(period, Mapping):
        return None
    start, end = period.get("start"), period.get("end")
    if not isinstance(start, str) or not isinstance(end, str):
        return None
    first, last = calendar_date(start), calendar_date(end)
    if first is None or last is None:
        return None
    return (last - first).days
