"""A deployment a change creates rather than the release's files (a PlanDefinition activated as
a CDS service): its base is no version (:data:`NEW`), and its files are all it has."""

from __future__ import annotations

from collections.abc import Mapping

from app.deployments.material import Material
from app.deployments.registry import Deployment

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


__all__ = ["NEW", "new_material", "placeholder"]
