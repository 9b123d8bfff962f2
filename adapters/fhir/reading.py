"""Reading FHIR JSON: FHIRPath evaluation, resources in prefetch values, codings, sources.

Pure functions shared by hydration (``adapters.fhir.hydrate``) and the instances it builds
(``adapters.fhir.instances``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from fhirpathpy import compile as fhirpath_compile

from app.world.facts import Source

_MEMBER_PATH = re.compile(r"^[A-Za-z][A-Za-z0-9]*(\.[A-Za-z][A-Za-z0-9]*)*$")


@lru_cache(maxsize=256)
def _path(expression: str) -> Any:
    if _MEMBER_PATH.match(expression):
        return tuple(expression.split("."))
    return fhirpath_compile(expression, None)


def _members(node: Any, names: tuple[str, ...]) -> list[Any]:
    """FHIRPath member navigation (``a.b.c``): collections flatten, absent members vanish."""
    current = [node]
    for name in names:
        step: list[Any] = []
        for item in current:
            value = item.get(name) if isinstance(item, dict) else None
            if isinstance(value, list):
                step.extend(v for v in value if v is not None)
            elif value is not None:
                step.append(value)
        current = step
    return current


def evaluate(node: Mapping[str, Any], expression: str) -> list[Any]:
    """Evaluate a FHIRPath expression; plain member paths take a direct walk (same result)."""
    compiled = _path(expression)
    if isinstance(compiled, tuple):
        return _members(node, compiled)
    result = compiled(dict(node))
    return list(result) if isinstance(result, list) else [result]


#: The elements that date a resource's content, most telling first: when it was observed or
#: began, when it was recorded or asserted, when it was ordered or issued.
_DATE_ELEMENTS = (
    ("effectiveDateTime",),
    ("effectiveInstant",),
    ("effectivePeriod", "start"),
    ("onsetDateTime",),
    ("onsetPeriod", "start"),
    ("occurrenceDateTime",),
    ("performedDateTime",),
    ("period", "start"),
    ("recordedDate",),
    ("assertedDate",),
    ("authoredOn",),
    ("issued",),
    ("date",),
)


def content_date(resource: Mapping[str, Any]) -> str | None:
    """The date a resource gives its content (``effectiveDateTime``, ``onsetDateTime``,
    ``recordedDate``, ``authoredOn``…), verbatim; None when it gives none."""
    for path in _DATE_ELEMENTS:
        node: Any = resource
        for name in path:
            node = node.get(name) if isinstance(node, Mapping) else None
        if isinstance(node, str) and node:
            return node
    return None


def source_of(resource: Mapping[str, Any]) -> Source:
    meta = resource.get("meta") or {}
    return Source(
        str(resource.get("resourceType")),
        str(resource.get("id")),
        meta.get("versionId"),
        meta.get("lastUpdated"),
        content_date(resource),
    )


def resources_of(value: Any) -> list[dict[str, Any]]:
    """The resources in a prefetch/context value: a Bundle's entries, a list, or one resource."""
    if isinstance(value, list):
        return [r for v in value for r in resources_of(v)]
    if not isinstance(value, dict) or "resourceType" not in value:
        return []
    if value["resourceType"] == "Bundle":
        return [
            e["resource"]
            for e in value.get("entry") or []
            if isinstance(e, dict) and isinstance(e.get("resource"), dict)
        ]
    return [value]


def as_codings(value: Any) -> list[Any]:
    """A Coding or CodeableConcept read into a string property: each coding as
    ``system|code`` (a coding without a code is no value); any other value unchanged."""
    if isinstance(value, dict) and "coding" in value:
        return codings(value)
    if isinstance(value, dict) and ("code" in value or "system" in value) and "value" not in value:
        return codings({"coding": [value]})
    return [value]


def codings(concept: Any) -> list[str]:
    """A CodeableConcept's codings as ``system|code`` (codings without a code left out)."""
    if not isinstance(concept, dict):
        return []
    return [
        f"{c.get('system', '')}|{c.get('code', '')}"
        for c in concept.get("coding") or []
        if isinstance(c, dict) and c.get("code")
    ]
