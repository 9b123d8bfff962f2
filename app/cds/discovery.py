"""``GET /cds-services``: the discovery document, generated from the ``horis:CdsService`` and
``horis:CombinedService`` nodes of the deployments that are served (a deployment that does not
verify lists nothing).

Two documents:

- **``/cds-services``** lists what a client may register all of without a prescriber meeting one
  finding twice: every combined service whose services are all served, and every service no
  such combined service combines.
- **``/individual/cds-services``** lists every service on its own (the CDC guideline's
  recommendations one by one), for an EHR that registers the ones it chooses; a client that
  registers all of them shows one card per service.

Every service is called at ``/cds-services/{id}`` (and, for clients that build the call's URL
from the discovery URL, at ``/individual/cds-services/{id}``) whichever document lists it.
"""

from __future__ import annotations

from typing import Any

from app.cds.combined import combined_prefetch
from app.deployments import Deployments
from app.ontology.services import CdsServiceDef


def _entry(s: CdsServiceDef) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "hook": s.hook,
        "title": s.title,
        "description": s.description,
        "id": s.id,
    }
    if s.prefetch:
        entry["prefetch"] = {t.key: t.query for t in s.prefetch}
    if s.usage_requirements:
        entry["usageRequirements"] = s.usage_requirements
    return entry


def individual_discovery(deployments: Deployments) -> dict[str, Any]:
    """Every served service on its own."""
    return {"services": [_entry(s) for s, _ in deployments.services()]}


def discovery(deployments: Deployments) -> dict[str, Any]:
    """The combined services and the services none of them combines."""
    combined: list[dict[str, Any]] = []
    covered: set[str] = set()
    for c, _d in deployments.combined():
        members = deployments.combined_members(c)
        if isinstance(members, str):  # not served: its services stay listed on their own
            continue
        covered.update(c.members)
        entry: dict[str, Any] = {
            "hook": c.hook,
            "title": c.title,
            "description": c.description,
            "id": c.id,
        }
        prefetch = combined_prefetch(members).templates
        if prefetch:
            entry["prefetch"] = prefetch
        combined.append(entry)
    rest = [_entry(s) for s, _ in deployments.services() if s.id not in covered]
    return {"services": sorted([*combined, *rest], key=lambda e: str(e["id"]))}
