"""FHIR JSON as received: the resources a prefetch or context value holds."""

from __future__ import annotations

from typing import Any


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


def full_urls(value: Any) -> dict[str, dict[str, Any]]:
    """The resources of the Bundles in a prefetch/context value by their entry's ``fullUrl``
    (``urn:uuid:…`` in a transaction Bundle): what a reference to that URL names."""
    if isinstance(value, list):
        return {k: r for v in value for k, r in full_urls(v).items()}
    if not isinstance(value, dict) or value.get("resourceType") != "Bundle":
        return {}
    return {
        e["fullUrl"]: e["resource"]
        for e in value.get("entry") or []
        if isinstance(e, dict)
        and isinstance(e.get("fullUrl"), str)
        and isinstance(e.get("resource"), dict)
    }
