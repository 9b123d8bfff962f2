"""Whether a workflow acts on anything outside the process: a language model, a wait for a
resume, a tool that is not ``horis:pure`` — in it or in any subflow it runs. A workflow that does
none of these only computes: it can be answered ahead (``horis:answeredAhead``) and run on the
event loop without a thread of its own (``app.cds.service``)."""

from __future__ import annotations

from collections.abc import Iterator

from app.ontology.model import Ontology, local_name
from app.ontology.workflows import (
    ActionStep,
    NarrationStep,
    PerceptionStep,
    ProposalStep,
    StepDef,
    SubflowStep,
    WaitStep,
)


def step_acts_outside(step: StepDef) -> str | None:
    """Why a step of this kind acts outside, or None."""
    if isinstance(step, PerceptionStep | NarrationStep) or (
        isinstance(step, ProposalStep) and step.rank_by
    ):
        return "asks a language model"
    if isinstance(step, WaitStep):
        return "waits for a resume"
    return None


def acts_outside(o: Ontology, workflow: str) -> Iterator[tuple[str, StepDef, str]]:
    """(workflow IRI, step, why) for every step of ``workflow`` and its subflows that acts
    outside the process."""
    seen: set[str] = set()
    pending = [workflow]
    while pending:
        w = o.workflows.get(pending.pop())
        if w is None or w.iri in seen:
            continue
        seen.add(w.iri)
        for step in w.steps.values():
            why = step_acts_outside(step)
            tool = o.tools.get(step.tool or "") if isinstance(step, ActionStep) else None
            if tool is not None and not tool.pure:
                why = f"calls {local_name(tool.iri)}, which is not horis:pure"
            if isinstance(step, SubflowStep) and step.workflow:
                pending.append(step.workflow)
            if why is not None:
                yield w.iri, step, why


def computes_only(o: Ontology, workflow: str) -> bool:
    """Whether ``workflow`` acts on nothing outside the process."""
    return next(acts_outside(o, workflow), None) is None


__all__ = ["acts_outside", "computes_only", "step_acts_outside"]
