"""What hydration hands the service: the changes for one transaction and what came with them.

:func:`app.fhir.hydrate.hydrate` fills a :class:`Hydration`; the instance readers
(``app.fhir.instances``) add to the same one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.data_notes import DataNote
from app.world.facts import Change, Source, Violation
from app.world.inputs import InputStatus


@dataclass(frozen=True, kw_only=True)
class SourceVersion:
    """One entry of the source-version vector."""

    source: Source
    content_hash: str

    def to_row(self) -> dict[str, Any]:
        return {
            "resource_type": self.source.resource_type,
            "resource_id": self.source.id,
            "version_id": self.source.version_id,
            "last_updated": self.source.last_updated,
            "content_hash": self.content_hash,
        }


@dataclass(kw_only=True)
class Hydration:
    """What the adapter read: changes for one transaction, problems found before the gate, the
    source-version vector, and the free text for PerceptionSteps."""

    changes: list[Change] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    sources: list[SourceVersion] = field(default_factory=list)
    text: str | None = None
    #: input read leniently (a bare subject reference), recorded with the run
    notes: list[DataNote] = field(default_factory=list)
    #: for every property read, whether its inputs are complete (app/world/inputs.py)
    inputs: InputStatus = field(default_factory=InputStatus)
    #: which terminology answered and which value-set and map versions (set by the service)
    terminology: dict[str, Any] | None = None
