"""What a FHIR server says about its own answer: ``OperationOutcome`` entries in a searchset.

A server that could not search part of its data (the allergy service was down) still answers
a searchset, with an ``OperationOutcome`` entry saying so. Its ``error`` or ``fatal`` issues
make that prefetch key's search incomplete — what it did not return may exist — and a
``warning`` or ``information`` issue is a data-quality note of the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.data_notes import DataNote

_FAILED = frozenset({"error", "fatal"})


def _said(issue: Mapping[str, Any]) -> str:
    details = issue.get("details")
    text = details.get("text") if isinstance(details, dict) else None
    for said in (issue.get("diagnostics"), text, issue.get("code")):
        if isinstance(said, str) and said.strip():
            return said.strip()[:200]
    return "no detail given"


def server_errors(data: Mapping[str, Any]) -> tuple[dict[str, str], list[DataNote]]:
    """Per prefetch key, the first error a searchset's ``OperationOutcome`` entries report;
    and a note for each lesser issue."""
    errors: dict[str, str] = {}
    notes: list[DataNote] = []
    for key, value in data.items():
        if not isinstance(value, dict) or value.get("resourceType") != "Bundle":
            continue
        for entry in value.get("entry") or []:
            resource = entry.get("resource") if isinstance(entry, dict) else None
            if not isinstance(resource, dict) or resource.get("resourceType") != "OperationOutcome":
                continue
            for issue in resource.get("issue") or []:
                if not isinstance(issue, dict):
                    continue
                said = _said(issue)
                if issue.get("severity") in _FAILED:
                    errors.setdefault(key, said)
                else:
                    notes.append(
                        DataNote(
                            rule="server-warning",
                            field=f"prefetch.{key}",
                            received=said,
                            read_as="the search's results, as answered",
                            message=f"The {key!r} search came with a note from the EHR: {said}",
                        )
                    )
    return errors, notes
