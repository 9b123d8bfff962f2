"""What the card says about a write that had no FHIR server to go to.

Without ``fhirServer`` in the hook request no commit adapter is registered: an adapter-mediated
tool is ``proposed`` and sends nothing. For a create (a message, a task) that means nobody was
told through the EHR, and the card says so in the words it uses for a refused create.
"""

from __future__ import annotations

from adapters.fhir.effect_log import effect_notice
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
