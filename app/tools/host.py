"""``ToolHost``: the tools one process offers, built once and shared by every run.

The service's lifespan, ``horismos run``, ``horismos replay`` and ``horismos tools`` build one
from the settings: the callables installed packages register (:mod:`app.tools.packaged`). Each
run gets its own :class:`~app.tools.invoker.ToolInvoker` from :meth:`ToolHost.invoker`, so a
hook call can register its own adapter handlers (``fhir``) without touching the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.ontology.loader import Registry
from app.ontology.model import Ontology
from app.tools.invoker import ToolInvoker
from app.tools.packaged import PackagedTools, discover


@dataclass
class ToolHost:
    """Packaged tools by name; shared, read-only after construction."""

    packaged: PackagedTools = field(default_factory=PackagedTools)

    @classmethod
    def discover(cls) -> ToolHost:
        """Register every tool the installed packages offer (``horismos.tools``)."""
        return cls(packaged=discover())

    @property
    def registry(self) -> Registry:
        """What ``python:NAME`` and ``rust:NAME`` bindings resolve to (the loader checks it)."""
        return self.packaged.registry

    def invoker(self) -> ToolInvoker:
        """A fresh invoker for one run, sharing the registry."""
        return ToolInvoker(tools=dict(self.registry))

    def binding_problems(self, ontology: Ontology) -> list[tuple[str, str]]:
        """``(tool IRI, message)`` for every binding the host cannot serve."""
        bindings = {iri: tool.binding for iri, tool in ontology.tools.items()}
        return self.packaged.problems_for(bindings)

    def status(self) -> dict[str, Any]:
        """What the host registered, for ``/readyz`` and ``horismos tools``."""
        return {"registered": [t.to_json() for t in self.packaged.listing]}
