"""What the card and the run record say about a write that had no FHIR server to go to.

Without ``fhirServer`` in the hook request no commit adapter is registered: an adapter-mediated
tool is ``proposed`` and sends nothing. For a create (a message, a task) that means nobody was
told through the EHR, and the card says so in the words it uses for a refused create; the run's
``effects`` list every such write as an entry of its own, ``not sent`` with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.cds.write_notices import effect_notice
from app.ontology.model import Ontology
from app.runtime.trace import TraceEntry

NO_SERVER = "the request names no FHIR server to write to"


def proposed_creates(ontology: Ontology, trace: list[TraceEntry]) -> dict[str, str]:
    """Tool name → the resource type of each create the run could not send anywhere."""
    creates = {
        t.name: t.commits.resource_type
        for t in ontology.tools.values()
        if t.commits is not None and t.commits.operation == "create"
    }
    return {
        call.tool: creates[call.tool]
        for entry in trace
        for call in entry.calls
        if call.type == "tool" and call.status == "proposed" and call.tool in creates
    }


def unsent_notices(ontology: Ontology, trace: list[TraceEntry]) -> list[str]:
    """A card sentence per create that had nowhere to go."""
    return [
        effect_notice(
            {"operation": "create", "resourceType": kind, "state": "refused", "detail": NO_SERVER}
        )
        for kind in proposed_creates(ontology, trace).values()
    ]


#: The hook context id naming the record a write of each resource type changes.
_CONTEXT_IDS = {"Patient": "patientId", "Encounter": "encounterId"}


def unsent_effects(
    ontology: Ontology, trace: list[TraceEntry], context: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """An ``effects`` entry per adapter-mediated write the run proposed and could not send (no
    FHIR server), in the shape of the effect log's entries, ``state`` ``not sent``."""
    commits = {t.name: t.commits for t in ontology.tools.values() if t.commits is not None}
    out: list[dict[str, Any]] = []
    for entry in trace:
        for call in entry.calls:
            if call.type != "tool" or call.status != "proposed":
                continue
            commit = commits.get(call.tool)
            if commit is None:
                continue
            record = context.get(_CONTEXT_IDS.get(commit.resource_type, ""))
            out.append(
                {
                    "effectId": None,
                    "tool": call.tool,
                    "target": commit.resource_type
                    if commit.operation == "create" or not isinstance(record, str)
                    else f"{commit.resource_type}/{record}",
                    "expectedVersion": None,
                    "resourceType": commit.resource_type,
                    "element": commit.element or None,
                    "value": call.args.get(commit.value_arg) if commit.value_arg else None,
                    "state": "not sent",
                    "status": None,
                    "newVersion": None,
                    "detail": NO_SERVER,
                    "attempts": 0,
                    "operation": commit.operation,
                }
            )
    return out


def unsent_record(
    ontology: Ontology, trace: list[TraceEntry], context: Mapping[str, Any]
) -> dict[str, Any]:
    """``{"effects": [...]}`` for the run's record, when it proposed writes it could not send."""
    effects = unsent_effects(ontology, trace, context)
    return {"effects": effects} if effects else {}
