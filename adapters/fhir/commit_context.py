"""What one hook call gives the commit adapter: where to write, under which grant, from what."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, kw_only=True)
class SourceRef:
    """One entry of a run's source-version vector."""

    resource_type: str
    id: str
    version_id: str | None

    @property
    def reference(self) -> str:
        return f"{self.resource_type}/{self.id}"


@dataclass(frozen=True, kw_only=True)
class CommitContext:
    """What one hook call gives the adapter: where to write, under which grant, from what."""

    fhir_server: str
    access_token: str | None = field(default=None, repr=False)
    scope: str | None = None
    sources: tuple[SourceRef, ...] = ()
    #: Hydrated resource bodies by ``Type/id``; without one the adapter GETs the current body.
    resources: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: The resource id the hook's context names per type (``encounterId`` → ``Encounter``).
    context_ids: Mapping[str, str] = field(default_factory=dict)
    #: The hook's context and its prefetch data by key, for ``horis:template`` placeholders.
    hook_context: Mapping[str, Any] = field(default_factory=dict)
    prefetch: Mapping[str, Any] = field(default_factory=dict)
    #: The link to the run's decision record (``{{run.url}}``), when the host can make one.
    run_url: str | None = None

    @classmethod
    def from_hook(
        cls,
        *,
        fhir_server: str,
        fhir_authorization: Mapping[str, Any] | None,
        sources: Iterable[Any],
        resources: Iterable[Mapping[str, Any]] = (),
        context: Mapping[str, Any] | None = None,
        prefetch: Mapping[str, Any] | None = None,
        run_url: str | None = None,
    ) -> CommitContext:
        """Build from a CDS request: ``sources`` are dicts or objects with ``resource_type``,
        ``id`` (or ``resource_id``) and ``version_id``; ``context`` is the hook context, whose
        ``<type>Id`` keys (``encounterId``, ``patientId``) name the context resources;
        ``prefetch`` is the hook's data by prefetch key."""
        auth = fhir_authorization or {}
        refs = tuple(_source_ref(s) for s in sources)
        bodies = {
            f"{r['resourceType']}/{r['id']}": r
            for r in resources
            if isinstance(r, Mapping) and "resourceType" in r and "id" in r
        }
        ids = {
            key[:-2][:1].upper() + key[:-2][1:]: str(value)
            for key, value in (context or {}).items()
            if key.endswith("Id") and isinstance(value, str) and "/" not in value
        }
        return cls(
            fhir_server=fhir_server.rstrip("/"),
            access_token=auth.get("access_token"),
            scope=auth.get("scope"),
            sources=refs,
            resources=bodies,
            context_ids=ids,
            hook_context=dict(context or {}),
            prefetch=dict(prefetch or {}),
            run_url=run_url,
        )


def _source_ref(source: Any) -> SourceRef:
    def get(name: str) -> Any:
        if type(source) is dict or isinstance(source, Mapping):  # a dict first: no ABC check
            return source.get(name)
        return getattr(source, name, None)

    return SourceRef(
        resource_type=str(get("resource_type")),
        id=str(get("id") or get("resource_id")),
        version_id=get("version_id"),
    )
