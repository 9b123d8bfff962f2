"""``GET /cds-services``: the discovery document, generated from ``horis:CdsService`` nodes."""

from __future__ import annotations

from typing import Any

from app.ontology.model import Ontology


def discovery(ontology: Ontology) -> dict[str, Any]:
    services = []
    for s in sorted(ontology.services.values(), key=lambda s: s.id):
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
