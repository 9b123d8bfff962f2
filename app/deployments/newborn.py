"""A deployment a change creates rather than the release's files (a PlanDefinition activated as
a CDS service): its base is no version (:data:`NEW`), and its files are all it has."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from app.deployments.material import Material
from app.deployments.registry import Deployment
from app.ontology.errors import Problem

#: The base digest of a change that creates its deployment.
NEW = "new"


def new_material(files: Mapping[str, str]) -> Material:
    """The whole material of a deployment a change creates: its own files, nothing imported."""
    return Material(own=tuple(sorted(files)), imports=(), files=dict(files))


def placeholder(deployment_id: str, iri: str) -> Deployment:
    """What a new deployment is built 'like': its id, no files on disk."""
    return Deployment(
        id=deployment_id, iri=iri, version="", digest=None, status="refused", files=()
    )


def unbuildable(iri: str, change_id: str, why: str) -> Deployment:
    """A created deployment whose active change cannot be built: refused, with why, its
    change named (so a rollback reaches it)."""
    ident = iri.rstrip("/").rsplit("/", 1)[-1].rsplit("#", 1)[-1] or iri
    return replace(
        placeholder(ident, iri),
        change_id=change_id,
        problems=(Problem(code="service", node=iri, message=f"its active change: {why}"),),
    )


__all__ = ["NEW", "new_material", "placeholder", "unbuildable"]
