"""The workflow interpreter (docs/runtime.md, "Execution semantics").

One current step. Per step: snapshot the World (the trace records its version) → check
``horis:requires`` on the focus → run the step body → commit its transaction (the World gates,
chains and reaches the fixed point) → follow the edge the body selected. A terminal step ends the
run after its body. Nothing passes between steps except through the World.

Where a run cannot continue although the ontology did not verify (a missing failure edge, such
as a required narration that failed with no ``horis:onError``), the run ends with status
``failed`` and a violation saying why; no exception escapes ``run_workflow``.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from app.ontology.model import Ontology, StepDef, WorkflowDef, humanise, local_name
from app.ontology.workflows import SubflowStep
from app.runtime.context import RunContext
from app.runtime.documents import Decision, Undecided
from app.runtime.names import show
from app.runtime.outcome import Outcome, SuspendedRun
from app.runtime.state import Body, Edge, Ended, Fail, Suspend
from app.runtime.steps import STEP_BODIES, StepAt, StepBodies
from app.runtime.trace import ConditionCheck, SubflowTrace, TraceEntry
from app.runtime.undecided import value_label
from app.world import World

#: the order of an outcome's facts: by their JSON (``json.dumps(row, default=str)``), with the
#: encoder built once rather than once per fact
_FACT_ORDER = json.JSONEncoder(default=str).encode


class _Run(StepBodies):
    """A run: the loop from step to step, each step's body run through ``STEP_BODIES``."""

    # --- the loop ------------------------------------------------------------------------

    def execute(
        self,
        wf: WorkflowDef,
        start: str,
        trace: list[TraceEntry],
        *,
        prefix: str = "",
        depth: int = 0,
    ) -> Ended:
        current: str | None = start
        while current is not None:
            step = wf.steps.get(current)
            if step is None:
                return self._fail(f"{local_name(current)} is not a step of {wf.name}")
            entry = TraceEntry(
                step=step.name,
                kind=step.kind,
                snapshot=self.world.version,
                at=self.ctx.time().isoformat(),
                calls=[],
            )
            entry_started = self.ctx.tick()
            trace.append(entry)
            key = prefix + step.name
            focus = self.focus(wf)
            body: Body
            if step.requires:
                holds = focus is not None and self.world.holds(focus, step.requires)
                entry.requires = ConditionCheck(conditions=self.conds(step.requires), holds=holds)
                if not holds:
                    body = (
                        Edge("onUnsatisfied", step.on_unsatisfied)
                        if step.on_unsatisfied
                        else Fail(f"the preconditions of {step.name} do not hold")
                    )
                    ended = self.advance(step, entry, body, entry_started)
                    if isinstance(ended, Ended):
                        return ended
                    current = ended
                    continue
            result = self.body(wf, step, entry, key, focus, depth)
            if isinstance(result, Ended):
                return result
            ended = self.advance(step, entry, result, entry_started)
            if isinstance(ended, Ended):
                if ended.status == "suspended":
                    ended.wait = (wf, step)
                return ended
            current = ended
        return self._fail(f"{wf.name} has no step to go to")

    def advance(
        self, step: StepDef, entry: TraceEntry, body: Body, started: float | None = None
    ) -> Ended | str:
        entry.finished = self.ctx.time().isoformat()
        ended = self.ctx.tick()
        if started is not None and ended is not None:
            entry.elapsedMs = (ended - started) * 1000
        if isinstance(body, Suspend):
            entry.edge = "suspend"
            return Ended("suspended")
        if isinstance(body, Fail):
            entry.edge = None
            entry.error = body.message
            return self._fail(body.message, step.iri)
        entry.edge = body.name
        entry.to = local_name(body.target) if body.target else None
        if step.terminal and body.name != "onUnsatisfied":
            return Ended("completed", terminal=step.iri)
        if body.target is None:
            entry.error = f"{step.name} has no {body.name} edge"
            return self._fail(entry.error, step.iri)
        return body.target

    def _fail(self, message: str, subject: str | None = None) -> Ended:
        self.violations.append(
            {"code": "run", "subject": subject, "property": None, "value": None, "message": message}
        )
        return Ended("failed")

    def body(
        self,
        wf: WorkflowDef,
        step: StepDef,
        entry: TraceEntry,
        key: str,
        focus: str | None,
        depth: int,
    ) -> Body | Ended:
        run_body = STEP_BODIES.get(type(step))
        if run_body is None:  # a plain step has no body of its own
            return Edge("next", step.next)
        return run_body(self, StepAt(wf, step, entry, key, focus, depth))


# --- the public entry points -------------------------------------------------------------


def _workflow(ontology: Ontology, name: str) -> WorkflowDef:
    if name in ontology.workflows:
        return ontology.workflows[name]
    for wf in ontology.workflows.values():
        if wf.name == name:
            return wf
    raise KeyError(f"no workflow {name!r} in the ontology")


def run_workflow(ontology: Ontology, workflow: str, world: World, ctx: RunContext) -> Outcome:
    """Run ``workflow`` (a name or IRI) on ``world`` (mutated in place) to a terminal step or
    a WaitStep. Raises ``KeyError`` only for an unknown workflow name."""
    wf = _workflow(ontology, workflow)
    run = _Run(ontology, world, ctx)
    ended = run.execute(wf, wf.starts_at, run.trace)
    return _outcome(run, wf, ended)


def resume_workflow(
    ontology: Ontology, suspended: SuspendedRun, facts: dict[str, Any], ctx: RunContext
) -> Outcome:
    """Continue a suspended run with structured facts (the ``horismos run --facts`` form,
    provenance ``human``); a resume after the WaitStep's ``horis:timeout`` takes
    ``horis:onTimeout`` instead."""
    world = World.from_json(ontology, suspended.world)
    root = _workflow(ontology, suspended.root_workflow or suspended.workflow)
    run = _Run(
        ontology,
        world,
        ctx,
        trace=copy.deepcopy(suspended.trace),
        goals=list(suspended.goals),
        violations=copy.deepcopy(suspended.violations),
        resume_facts=dict(facts),
        waiting_since=suspended.waiting_since,
        undecided=copy.deepcopy(suspended.undecided),
    )
    wf = _workflow(ontology, suspended.workflow)
    if suspended.parent is None:
        ended = run.execute(wf, suspended.step, run.trace)
        return _outcome(run, root, ended)
    parent = _workflow(ontology, suspended.parent["workflow"])
    sub_step = parent.steps.get(suspended.parent["step"])
    if not isinstance(sub_step, SubflowStep):
        raise KeyError(f"{suspended.parent['step']!r} is not a SubflowStep of {parent.name}")
    entry = run.trace[-1]
    if entry.subflow is None:
        entry.subflow = SubflowTrace()
    nested = entry.subflow.trace
    ended = run.execute(wf, suspended.step, nested, prefix=sub_step.name + "/", depth=1)
    body = run.after_subflow(parent, sub_step, entry, ended)
    if isinstance(body, Ended):
        return _outcome(run, root, body)
    nxt = run.advance(sub_step, entry, body)
    if isinstance(nxt, Ended):
        return _outcome(run, root, nxt)
    return _outcome(run, root, run.execute(parent, nxt, run.trace))


def _outcome(run: _Run, wf: WorkflowDef, ended: Ended) -> Outcome:
    ontology, world = run.ontology, run.world
    focus = run.focus(wf)
    decision: Decision | None = None
    proof: dict[str, Any] | None = None
    undecided: Undecided | None = None
    if run.undecided:
        held = world.value(focus, wf.decides) if focus and wf.decides else None
        prop = ontology.properties.get(wf.decides) if wf.decides else None
        undecided = Undecided.model_validate(
            {
                "property": local_name(wf.decides) if wf.decides else None,
                "propertyLabel": (prop.label or humanise(prop.name)) if prop else None,
                "held": show(ontology, held) if held is not None else None,
                "heldLabel": value_label(ontology, held) if held is not None else None,
                "inputs": run.undecided,
            }
        )
    elif wf.decides is not None and focus is not None and ended.status == "completed":
        value = world.value(focus, wf.decides)
        if value is not None:
            decision = Decision(property=local_name(wf.decides), value=show(ontology, value))
            proof = world.proof(focus, wf.decides).to_json()
    suspended: SuspendedRun | None = None
    if ended.status == "suspended" and ended.wait is not None:
        wait_wf, wait_step = ended.wait
        suspended = SuspendedRun(
            run_id=run.ctx.run_id,
            workflow=wait_wf.iri,
            step=wait_step.iri,
            waiting_since=run.waiting_since or run.ctx.now.isoformat(),
            world=world.to_json(),
            trace=copy.deepcopy(run.trace),
            goals=run.goals,
            violations=run.violations,
            parent=ended.parent,
            root_workflow=wf.iri,
            undecided=run.undecided,
        )
    facts = sorted(
        ([f.subject, local_name(f.property), show(ontology, f.value)] for f in world.facts()),
        key=_FACT_ORDER,
    )
    return Outcome(
        run_id=run.ctx.run_id,
        workflow=wf.name,
        version=wf.version,
        terminal=local_name(ended.terminal) if ended.terminal else None,
        decision=decision,
        goal_reached=all(run.goals),
        proof=proof,
        trace=run.trace,
        violations=run.violations + _step_violations(run.trace),
        status=ended.status,
        suspended=suspended,
        facts=facts,
        undecided=undecided,
    )


def _step_violations(trace: list[TraceEntry]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for entry in trace:
        out.extend(entry.violations or [])
        if entry.subflow is not None:
            out.extend(_step_violations(entry.subflow.trace))
    return out
