"""``GET /cds-services``: the discovery document, generated from the ``horis:CdsService`` nodes of
the deployments that are served (a deployment that does not verify lists nothing)."""

from __future__ import annotations

from typing import Any

from app.deployments import Deployments


def discovery(deployments: Deployments) -> dict[str, Any]:
    services = []
    for s, _ in deployments.services():
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
        services.append(entry)
    return {"services": services}
