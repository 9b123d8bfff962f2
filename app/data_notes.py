"""Data-quality notes: input the service read although it was not what the standard says.

A note is not a refusal (that is a ``Violation``, and the value is not used): the input was
unambiguous and was read as ``read_as``; the note keeps what was received so an auditor sees
both. The CDS service stores every note of a run as ``dataQuality`` in the run record
(``GET /runs/{id}``); docs/cds-hooks.md, "Request leniency", lists the rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class DataNote:
    rule: str  # which leniency rule applied, e.g. "typed-context-id"
    field: str  # where: "context.patientId", "hook", "MedicationRequest/o1 subject"
    received: Any  # what the input said
    read_as: Any  # how it was read
    message: str  # one sentence for people

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "field": self.field,
            "received": self.received,
            "readAs": self.read_as,
            "message": self.message,
        }


@dataclass(frozen=True, kw_only=True)
class Unreadable:
    """A resource received that is not valid FHIR R4 and so was not read: a refused record of
    every input its prefetch key feeds, not a refusal of the whole call."""

    reference: str  # "Encounter/e1", or where it was ("prefetch.vitals.entry[3].resource")
    resource_type: str  # its resourceType, "" when it has none
    why: str  # the element and the rule: "class: field required"

    def to_json(self) -> dict[str, Any]:
        return {"reference": self.reference, "resourceType": self.resource_type, "why": self.why}
