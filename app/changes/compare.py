"""One stored hook run decided again on a given version: its FHIR input hydrated again under that
version, its recorded Bridge answers and outside effects substituted, its pure tools re-run.

Used by a change's replay (in its sandbox, on the base and the candidate version) and by shadow
mode (in the service, on an approved change beside the active version).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.cds.hook_input import HookInput, InputUnusable, rehydrated_recording
from app.ontology.model import Ontology
from app.runtime.context import ToolPort
from app.runtime.replay import RecordedRun, replay_run


def decision_of(outcome: Mapping[str, Any]) -> dict[str, Any]:
    """What a run decided, as a change's report compares it: decision, terminal, status and
    the proof."""
    return {
        "decision": outcome.get("decision"),
        "terminal": outcome.get("terminal"),
        "status": outcome.get("status"),
        "proof": outcome.get("proof"),
    }


def differs(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    """Whether the decision (or the terminal step the run ended at) changed."""
    return any(before.get(k) != after.get(k) for k in ("decision", "terminal", "status"))


def decide_again(
    ontology: Ontology, recorded: RecordedRun, stored: HookInput, *, tools: ToolPort | None
) -> dict[str, Any]:
    """What ``ontology`` decides on the run's input (``error`` when it cannot run it)."""
    try:
        again = rehydrated_recording(ontology, recorded, stored)
    except InputUnusable as exc:
        return {"error": str(exc)}
    report = replay_run(ontology, again, tools=tools, rerun_idempotent=True)
    if report.outcome is None:
        return {"error": report.error or "the run could not be replayed"}
    return decision_of(report.outcome.to_json())


__all__ = ["decide_again", "decision_of", "differs"]
