"""What a FHIR resource says of itself before any property reads it: whether its status lets it
count as a record at all, whom it is about, its components, and the earliest instant its time
could mean (the hydration of ``app.fhir.hydrate`` asks these of every resource)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from app.fhir.times import effective

UCUM = "http://unitsofmeasure.org"

# FHIR R4 statuses under which a resource of that type is a result a decision may read (status
# is a modifier element); every other type is limited only by "entered-in-error" below.
_USABLE_STATUS: dict[str, frozenset[str]] = {
    "Observation": frozenset({"final", "amended", "corrected", "preliminary"}),
}
_IN_ERROR = "entered-in-error"
ABSENT = "dataAbsentReason"  # on a resource or component: there is no value to read


def record_problem(resource: Mapping[str, Any]) -> str | None:
    """Why the resource's status keeps it from becoming a fact at all, or None: a status its
    type does not count as a result (an Observation that is registered, cancelled or of unknown
    status), or ``entered-in-error`` as ``status`` or ``verificationStatus``."""
    status = resource.get("status")
    verification = resource.get("verificationStatus")
    codings = verification.get("coding") if isinstance(verification, dict) else None
    if status == _IN_ERROR or any(
        isinstance(c, dict) and c.get("code") == _IN_ERROR for c in codings or []
    ):
        return "it was entered in error"
    usable = _USABLE_STATUS.get(str(resource.get("resourceType")))
    if usable is not None and status not in usable:
        return f"its status is {status!r}, not a result" if status else "it has no status"
    return None


def is_record(resource: Mapping[str, Any]) -> bool:
    return record_problem(resource) is None


def absent_reason(node: Mapping[str, Any]) -> str:
    """A ``dataAbsentReason`` in words: its text, else its code."""
    reason = node.get(ABSENT)
    if not isinstance(reason, dict):
        return "it has no value"
    codes = [c.get("code") for c in reason.get("coding") or [] if isinstance(c, dict)]
    said = [str(w) for w in (reason.get("text"), *codes) if w]
    return f"it has no value ({said[0]})" if said else "it has no value"


FOCUS_TYPE = "Patient"  # the resource type of CDS Hooks' context.patientId
_ABOUT = ("subject", "patient")  # the element that says whom a resource is about


def about(resource: Mapping[str, Any]) -> str | None:
    """The reference to whom ``resource`` is about: its ``subject`` or ``patient`` Reference (a
    focus-type resource is about itself); None when it names no one."""
    if resource.get("resourceType") == FOCUS_TYPE:
        return f"{FOCUS_TYPE}/{resource.get('id')}"
    for name in _ABOUT:
        node = resource.get(name)
        if isinstance(node, dict):
            ref = node.get("reference")
            return ref if isinstance(ref, str) else None
    return None


def is_bare(reference: str) -> bool:
    """A reference that is a plain id: no resource type, no URL, not a contained ``#id``."""
    return "/" not in reference and ":" not in reference and not reference.startswith("#")


def refers_to(reference: str, target: str) -> bool:
    """``reference`` names ``target`` (``Type/id``): relative, an absolute URL ending in it, or
    either with a ``/_history/N`` version."""
    plain = reference.split("/_history/", 1)[0]
    return plain == target or plain.endswith("/" + target)


def not_ucum(quantity: Mapping[str, Any], wanted: str) -> str:
    system, display = quantity.get("system"), quantity.get("unit")
    if system not in (None, UCUM):
        return (
            f"the unit system {system!r} is not UCUM and the display {display!r} is not {wanted!r}"
        )
    if display is None:
        return "a quantity without a unit"
    return f"a quantity without a UCUM code, only the display {display!r} (not {wanted!r})"


#: the earliest offset a local time can carry (UTC+14:00): a day starts there first
_EARLIEST_OFFSET = timedelta(hours=14)


def earliest(r: Mapping[str, Any], when: datetime) -> datetime:
    """The earliest instant ``r``'s effective time can mean: itself for a time, the start of its
    day where days start first (UTC+14:00) for a date alone — so a reading dated today in a
    time zone east of UTC is not taken for one from the future."""
    written = effective(r)
    return when - _EARLIEST_OFFSET if len(written) <= 10 else when


def components(r: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [c for c in r.get("component") or [] if isinstance(c, dict)]
