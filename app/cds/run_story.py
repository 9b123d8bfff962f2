"""What a hook run's cards say about how the run went, beyond its decision: the steps that took a
failure edge and why (docs/cards.md, "Glossary"), the tool calls that failed, the last narration
a language model wrote, and the FHIR resources the cards may name, by reference."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.fhir_json import resources_of
from app.ontology.model import Ontology, WorkflowDef, humanise
from app.runtime.trace import TraceEntry

#: How a card says that a step left the workflow's main path, by the edge it took
#: (docs/cards.md, "Glossary"); ``{why}`` is the trace's reason, in the reader's words.
_DETOURS = {
    "fallback": "{step} could not be completed ({why}), so the workflow ended at: {end}.",
    # a PerceptionStep's fallback: the free text did not count, the structured data did
    "fallback-text": "{step} could not be completed ({why}), so the free text was not used: "
    "what follows is from the structured data alone, and the workflow ended at: {end}.",
    "onUnreachable": "{step}: the data available did not allow a decision, so the workflow "
    "ended at: {end}.",
    "onError": "{step} failed ({why}), so the workflow ended at: {end}.",
    "onUnsatisfied": "{step} could not start: what it needs did not hold, so the workflow "
    "ended at: {end}.",
    "onTimeout": "{step} waited too long ({why}), so the workflow ended at: {end}.",
    "onIncomplete": "{step}: data it needs is missing or could not be used, so no decision was "
    "made and the workflow ended at: {end}.",
}
#: The trace's engine words a card reader does not need to learn.
_PLAIN_WORDS = (("no Bridge configured", "no language model is configured"), ("Bridge ", ""))


def _plain(why: str) -> str:
    for engine_words, plain in _PLAIN_WORDS:
        why = why.replace(engine_words, plain)
    return why


def _step_label(workflow: WorkflowDef, name: str | None) -> str:
    step = next((s for s in workflow.steps.values() if s.name == name), None)
    if step is not None and step.label:
        return step.label
    return humanise(name or "")


def failed_actions(ontology: Ontology, trace: list[TraceEntry]) -> list[str]:
    """One sentence per tool call that failed. A write with nowhere to go (the request named no
    FHIR server, so it was only proposed) is no failure, and a write the EHR answered is told
    by the commit handler's notices."""
    labels = {t.name: t.label for t in ontology.tools.values() if t.label}
    out: list[str] = []
    for entry in trace:
        for call in entry.calls:
            error = call.error
            if error is None or call.type != "tool" or "effects" in (error.model_extra or {}):
                continue
            if call.status == "proposed":
                continue
            tool = labels.get(call.tool) or humanise(call.tool)
            out.append(f"{tool} was not completed: {_plain(error.message or 'it failed')}.")
    return out


def detours(workflow: WorkflowDef, trace: list[TraceEntry], terminal: str | None) -> list[str]:
    """One sentence per step that took a failure edge: why the run ended where it did."""
    out: list[str] = []
    end = _step_label(workflow, terminal)
    perceives = {s.name for s in workflow.steps.values() if s.kind == "PerceptionStep"}
    for entry in trace:
        edge = "onIncomplete" if entry.undecided else entry.edge or ""
        if edge == "fallback" and entry.step in perceives:
            edge = "fallback-text"
        template = _DETOURS.get(edge)
        if template is None:
            continue
        why = _plain(entry.reason or entry.error or "it could not complete")
        out.append(template.format(step=_step_label(workflow, entry.step), why=why, end=end))
    return out


def narration(trace: list[TraceEntry]) -> str | None:
    """The last narration a language model wrote (a narration that fell back to the proof's
    text is not one: the card shows the proof itself)."""
    for entry in reversed(trace):
        if entry.kind != "NarrationStep" or entry.narration is None:
            continue
        if entry.narration.generated and entry.narration.text.strip():
            return entry.narration.text
    return None


def context_resources(context: Mapping[str, Any]) -> list[dict[str, Any]]:
    """FHIR resources the hook context carries (e.g. ``draftOrders``)."""
    return [r for v in context.values() for r in resources_of(v)]


def by_reference(resources: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``Type/id`` → the resource as read; the first one read wins."""
    out: dict[str, dict[str, Any]] = {}
    for r in resources:
        if isinstance(r.get("resourceType"), str) and isinstance(r.get("id"), str):
            out.setdefault(f"{r['resourceType']}/{r['id']}", r)
    return out
