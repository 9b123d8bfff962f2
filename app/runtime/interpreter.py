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
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any, Literal, TypeVar

from app.bridge.protocol import BridgeError, BridgeResult, schema_hash
from app.ontology.model import (
    Condition,
    Ontology,
    StepDef,
    ToolDef,
    WorkflowDef,
    humanise,
    local_name,
)
from app.runtime.calls import ExternalCalls
from app.runtime.context import RunContext
from app.runtime.effects import ContractError, effect_changes, resolve_args
from app.runtime.names import condition_json, namespace_of, qualify_structured, show
from app.runtime.outcome import Outcome, SuspendedRun
from app.runtime.perception import extraction_changes
from app.runtime.trace import (
    ConditionCheck,
    Narration,
    Resumed,
    SubflowTrace,
    TraceEntry,
    TraceFact,
)
from app.runtime.undecided import undecided_json, value_label
from app.tools.errors import EffectNotExecuted, ToolError
from app.world import World
from app.world.facts import Assert, Fact, TxResult

T = TypeVar("T")

PERCEPTION_RETRIES = 2


@dataclass
class _Edge:
    name: str  # next | fallback | onError | onUnreachable | onUnsatisfied | onTimeout | …
    target: str | None


@dataclass
class _Suspend:
    step: StepDef


@dataclass
class _Fail:
    message: str


_Body = _Edge | _Suspend | _Fail


@dataclass
class _Ended:
    status: Literal["completed", "suspended", "failed"]
    terminal: str | None = None
    wait: tuple[WorkflowDef, StepDef] | None = None
    parent: dict[str, str] | None = None


@dataclass
class _Run:
    ontology: Ontology
    world: World
    ctx: RunContext
    trace: list[TraceEntry] = field(default_factory=list)
    goals: list[bool] = field(default_factory=list)
    violations: list[dict[str, Any]] = field(default_factory=list)
    resume_facts: dict[str, Any] | None = None
    waiting_since: str | None = None
    #: why a ReasoningStep's goal was not decided (incomplete inputs that could change it)
    undecided: list[dict[str, Any]] = field(default_factory=list)
    calls: ExternalCalls = field(init=False)

    def __post_init__(self) -> None:
        self.calls = ExternalCalls(self.ctx)

    # --- the loop ------------------------------------------------------------------------

    def execute(
        self,
        wf: WorkflowDef,
        start: str,
        trace: list[TraceEntry],
        *,
        prefix: str = "",
        depth: int = 0,
    ) -> _Ended:
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
            body: _Body
            if step.requires:
                holds = focus is not None and self.world.holds(focus, step.requires)
                entry.requires = ConditionCheck(conditions=self.conds(step.requires), holds=holds)
                if not holds:
                    body = (
                        _Edge("onUnsatisfied", step.on_unsatisfied)
                        if step.on_unsatisfied
                        else _Fail(f"the preconditions of {step.name} do not hold")
                    )
                    ended = self.advance(step, entry, body, entry_started)
                    if isinstance(ended, _Ended):
                        return ended
                    current = ended
                    continue
            result = self.body(wf, step, entry, key, focus, trace, depth)
            if isinstance(result, _Ended):
                return result
            ended = self.advance(step, entry, result, entry_started)
            if isinstance(ended, _Ended):
                if ended.status == "suspended":
                    ended.wait = (wf, step)
                return ended
            current = ended
        return self._fail(f"{wf.name} has no step to go to")

    def advance(
        self, step: StepDef, entry: TraceEntry, body: _Body, started: float | None = None
    ) -> _Ended | str:
        entry.finished = self.ctx.time().isoformat()
        ended = self.ctx.tick()
        if started is not None and ended is not None:
            entry.elapsedMs = (ended - started) * 1000
        if isinstance(body, _Suspend):
            entry.edge = "suspend"
            return _Ended("suspended")
        if isinstance(body, _Fail):
            entry.edge = None
            entry.error = body.message
            return self._fail(body.message, step.iri)
        entry.edge = body.name
        entry.to = local_name(body.target) if body.target else None
        if step.terminal and body.name != "onUnsatisfied":
            return _Ended("completed", terminal=step.iri)
        if body.target is None:
            entry.error = f"{step.name} has no {body.name} edge"
            return self._fail(entry.error, step.iri)
        return body.target

    def _fail(self, message: str, subject: str | None = None) -> _Ended:
        self.violations.append(
            {"code": "run", "subject": subject, "property": None, "value": None, "message": message}
        )
        return _Ended("failed")

    def focus(self, wf: WorkflowDef) -> str | None:
        if wf.focus is None:
            return None
        found = self.world.instances(wf.focus)
        return found[0].id if found else None

    def conds(self, conditions: tuple[Condition, ...]) -> list[dict[str, Any]]:
        return [condition_json(self.ontology, c) for c in conditions]

    def record_tx(self, entry: TraceEntry, tx: TxResult) -> None:
        if tx.ok:
            delta = entry.changed()
            delta.added.extend(self.fact_json(f) for f in tx.added)
            delta.removed.extend(self.fact_json(f) for f in tx.removed)
        else:
            entry.add_violations(v.to_json() for v in tx.violations)

    def fact_json(self, f: Fact) -> TraceFact:
        fact = TraceFact(
            subject=f.subject,
            property=local_name(f.property),
            value=show(self.ontology, f.value),
            provenance=f.provenance,
        )
        if f.confidence is not None:
            fact.confidence = f.confidence
        return fact

    # --- the step bodies -------------------------------------------------------------------

    def body(
        self,
        wf: WorkflowDef,
        step: StepDef,
        entry: TraceEntry,
        key: str,
        focus: str | None,
        trace: list[TraceEntry],
        depth: int,
    ) -> _Body | _Ended:
        kind = step.kind
        if kind == "PerceptionStep":
            return self.perceive(wf, step, entry, key, focus)
        if kind == "ReasoningStep":
            return self.reason(step, entry, focus)
        if kind == "ActionStep":
            return self.act(step, entry, key, focus)
        if kind == "NarrationStep":
            return self.narrate(step, entry, key, focus)
        if kind == "ProposalStep":
            return self.propose(step, entry, key, focus)
        if kind == "WaitStep":
            return self.wait(wf, step, entry)
        if kind == "ChoiceStep":
            for i, branch in enumerate(step.branches, start=1):
                if focus is not None and self.world.holds(focus, branch.when):
                    entry.branch = i
                    return _Edge(f"branch{i}", branch.next)
            return _Edge("otherwise", step.otherwise)
        if kind == "SubflowStep":
            return self.subflow(wf, step, entry, key, depth)
        return _Edge("next", step.next)

    def reason(self, step: StepDef, entry: TraceEntry, focus: str | None) -> _Body:
        """Evaluate the goal; a goal that an incomplete input could change is *undecided*: the
        step takes ``horis:onIncomplete`` (else ``onUnreachable``) and names those inputs."""
        holds = focus is not None and self.world.holds(focus, step.goal)
        entry.goal = ConditionCheck(conditions=self.conds(step.goal), holds=holds)
        inputs = self.ctx.inputs
        blockers = (
            self.world.undecided(focus, step.goal, inputs.incomplete())
            if inputs is not None and focus is not None
            else ()
        )
        if blockers:
            assert inputs is not None
            self.goals.append(False)
            found = undecided_json(self.ontology, blockers, inputs)
            entry.undecided = found
            self.undecided.extend(found)
            if step.on_incomplete is not None:
                return _Edge("onIncomplete", step.on_incomplete)
            return _Edge("onUnreachable", step.on_unreachable)
        self.goals.append(holds)
        return _Edge("next", step.next) if holds else _Edge("onUnreachable", step.on_unreachable)

    def perceive(
        self, wf: WorkflowDef, step: StepDef, entry: TraceEntry, key: str, focus: str | None
    ) -> _Body:
        text = self.ctx.text
        if not text:
            entry.skipped = "no input text"
            return _Edge("next", step.next)
        bridge = self.ctx.bridge_of(step.model)
        if bridge is None and self.ctx.recorded is None:
            entry.reason = "no Bridge configured"
            return _Edge("fallback", step.fallback)
        from app.ontology import derive_schema

        schema = derive_schema(self.ontology, step.extracts)
        digest = schema_hash(schema)
        threshold = step.confidence if step.confidence is not None else 0.0
        budget = step.retries if step.retries is not None else PERCEPTION_RETRIES
        feedback: list[dict[str, Any]] = []
        for attempt in range(budget + 1):
            try:
                result: BridgeResult[dict[str, Any]] = self.calls.bridge_call(
                    entry,
                    key,
                    "extract",
                    None
                    if bridge is None
                    else partial(bridge.extract, text, schema, feedback=list(feedback)),
                    {
                        "schemaHash": digest,
                        "attempt": attempt,
                        "feedback": list(feedback),
                        **_requested(step),
                    },
                    bridge=bridge,
                )
            except BridgeError as exc:
                entry.reason = f"Bridge {exc.kind}: {exc.message}"
                return _Edge("fallback", step.fallback)
            if result.confidence < threshold:
                entry.reason = f"confidence {result.confidence} below {threshold}"
                return _Edge("fallback", step.fallback)
            changes = extraction_changes(
                self.ontology,
                result.output if isinstance(result.output, dict) else {},
                focus=focus,
                focus_class=wf.focus,
                id_prefix=f"{self.ctx.run_id}-{step.name}-{attempt + 1}",
                namespace=namespace_of(wf.iri),
            )
            tx = self.world.transact(changes, provenance="perception", confidence=result.confidence)
            self.record_tx(entry, tx)
            if tx.ok:
                entry.attempts = attempt + 1
                return _Edge("next", step.next)
            feedback = [v.to_json() for v in tx.violations]
        entry.attempts = budget + 1
        entry.reason = "the extraction still failed validation after its retries"
        return _Edge("fallback", step.fallback)

    def act(self, step: StepDef, entry: TraceEntry, key: str, focus: str | None) -> _Body:
        tool = self.ontology.tools.get(step.tool or "")
        if tool is None:
            return _Fail(f"{step.name} names no known tool")
        entry.tool = tool.name
        if not step.for_each:
            return self.invoke(step, tool, entry, key, focus, record_args=True)
        instances = self.each_instance(step, focus)
        entry.instances = instances
        for instance in instances:
            body = self.invoke(step, tool, entry, key, instance, record_args=False)
            if body.name != "next":
                return body
        return _Edge("next", step.next)

    def each_instance(self, step: StepDef, focus: str | None) -> list[str]:
        """The instances a ``horis:forEach`` step calls its tool for, each once, in the order
        the paths reach them (hydration's order, so a replay takes its calls in the same order)."""
        return self.world.each(focus, step.for_each, step.each_where)

    def invoke(
        self,
        step: StepDef,
        tool: ToolDef,
        entry: TraceEntry,
        key: str,
        focus: str | None,
        *,
        record_args: bool,
    ) -> _Edge:
        """One call of the step's tool on ``focus`` (the run's focus, or a forEach instance)."""
        try:
            args = resolve_args(self.ontology, self.world, focus, step, tool)
        except ContractError as exc:
            entry.error = str(exc)
            return _Edge("onError", step.on_error)
        if record_args:
            entry.args = args
        if self.undecided and tool.commits is not None and not tool.commits.is_message:
            # an undecided run writes nothing back to the record; a message to a clinician
            # still goes, so that somebody hears of it
            entry.effect = "refused"
            entry.reason = "not written back: the decision was not reached (incomplete inputs)"
            return _Edge("next", step.next)
        default = 1 if tool.idempotent else 0
        budget = (
            step.retries
            if step.retries is not None
            else (tool.retries if tool.retries is not None else default)
        )
        for attempt in range(budget + 1):
            try:
                raw = self.calls.tool_call(entry, key, tool, args, attempt)
            except EffectNotExecuted as exc:  # nothing sent: the decision stands, unwritten
                entry.effect = exc.effect
                entry.reason = exc.message
                return _Edge("next", step.next)
            except ToolError as exc:
                entry.error = exc.message
                if exc.retryable and attempt < budget:
                    continue
                entry.attempts = attempt + 1
                return _Edge("onError", step.on_error)
            entry.attempts = attempt + 1
            try:
                changes = effect_changes(
                    self.ontology, self.world, tool, raw, focus=focus, now=self.ctx.now
                )
            except ContractError as exc:
                entry.error = str(exc)
                return _Edge("onError", step.on_error)
            tx = self.world.transact(changes, provenance="tool")
            self.record_tx(entry, tx)
            if not tx.ok:
                entry.error = "the tool's effects were rejected by the gate"
                return _Edge("onError", step.on_error)
            entry.unset("error")
            return _Edge("next", step.next)
        return _Edge("onError", step.on_error)

    def narrate(self, step: StepDef, entry: TraceEntry, key: str, focus: str | None) -> _Body:
        if focus is None or step.narrates is None or self.world.value(focus, step.narrates) is None:
            entry.narration = None
            entry.reason = "nothing to narrate"
            return self.narration_failed(step, entry)
        rendered = self.world.proof(focus, step.narrates).render()
        bridge = self.ctx.bridge_of(step.model)
        if bridge is None and self.ctx.recorded is None:
            entry.reason = "no Bridge configured"
        else:
            try:
                told: BridgeResult[str] = self.calls.bridge_call(
                    entry,
                    key,
                    "narrate",
                    None
                    if bridge is None
                    else lambda: bridge.narrate(rendered, step.audience, step.style),
                    {"audience": step.audience, "style": step.style, **_requested(step)},
                    bridge=bridge,
                )
                entry.narration = Narration(
                    text=told.output, generated=True, confidence=told.confidence
                )
                return _Edge("next", step.next)
            except BridgeError as exc:
                entry.reason = f"Bridge {exc.kind}: {exc.message}"
        entry.narration = Narration(text=rendered, generated=False)
        return self.narration_failed(step, entry)

    def narration_failed(self, step: StepDef, entry: TraceEntry) -> _Body:
        if not step.required:
            return _Edge("next", step.next)
        entry.required = True
        if step.on_error:
            return _Edge("onError", step.on_error)
        if step.terminal:  # the run ends here all the same; the trace says the narration failed
            return _Edge("onError", None)
        if step.fallback:
            return _Edge("fallback", step.fallback)
        return _Fail(f"the required narration of {step.name} failed")

    def propose(self, step: StepDef, entry: TraceEntry, key: str, focus: str | None) -> _Body:
        query = step.candidates
        values: list[Any] = []
        if query is not None:
            if query.class_iri is not None:
                values = [i.id for i in self.world.instances(query.class_iri)]
            elif focus is not None and query.path:
                values = list(self.world.reach(focus, query.path))
            values = [
                v
                for v in values
                if not query.where or (isinstance(v, str) and self.world.holds(v, query.where))
            ]
        names = [str(show(self.ontology, v)) for v in values]
        by_name = dict(zip(names, values, strict=True))
        entry.candidates = names
        if not names:
            entry.reason = "no legal candidates"
            return _Edge("fallback", step.fallback)
        bridge = self.ctx.bridge_of(step.model)
        if bridge is None and self.ctx.recorded is None:
            entry.reason = "no Bridge configured"
            return _Edge("fallback", step.fallback)
        criterion = step.rank_by or ""
        text = self.ctx.text
        try:
            ranked: BridgeResult[list[str]] = self.calls.bridge_call(
                entry,
                key,
                "rank",
                None if bridge is None else lambda: bridge.rank(names, criterion, text=text),
                {"candidates": names, "criterion": criterion, **_requested(step)},
                bridge=bridge,
            )
        except BridgeError as exc:
            entry.reason = f"Bridge {exc.kind}: {exc.message}"
            return _Edge("fallback", step.fallback)
        invented = [c for c in ranked.output if c not in by_name]
        if not ranked.output or invented:
            entry.reason = (
                f"the ranking names non-candidates {invented}"
                if invented
                else ("the ranking is empty")
            )
            return _Edge("fallback", step.fallback)
        threshold = step.confidence if step.confidence is not None else 0.0
        if ranked.confidence < threshold:
            entry.reason = f"confidence {ranked.confidence} below {threshold}"
            return _Edge("fallback", step.fallback)
        choice = ranked.output[0]
        entry.selected = choice
        if focus is None or step.selects is None:
            return _Fail(f"{step.name} has no focus property to record its selection on")
        tx = self.world.transact(
            [Assert(focus, step.selects, by_name[choice])],
            provenance="perception",
            confidence=ranked.confidence,
        )
        self.record_tx(entry, tx)
        if not tx.ok:
            entry.reason = "the selection was rejected by the gate"
            return _Edge("fallback", step.fallback)
        return _Edge("next", step.next)

    def wait(self, wf: WorkflowDef, step: StepDef, entry: TraceEntry) -> _Body:
        facts = self.resume_facts
        if facts is None:
            entry.awaits = [local_name(p) for p in step.awaits]
            self.waiting_since = self.ctx.now.isoformat()
            return _Suspend(step)
        self.resume_facts = None
        since = datetime.fromisoformat(self.waiting_since or self.ctx.now.isoformat())
        waited = (self.ctx.now - since).total_seconds()
        entry.resumed = Resumed(waitedSeconds=waited)
        if step.timeout is not None and waited > step.timeout:
            entry.reason = f"resumed after {waited}s, past the {step.timeout}s timeout"
            return _Edge("onTimeout", step.on_timeout)
        from app.world import load_structured

        qualified = qualify_structured(self.ontology, facts, namespace_of(wf.iri))
        tx = load_structured(self.world, qualified, provenance="human")
        self.record_tx(entry, tx)
        if not tx.ok:
            entry.reason = "the resume's facts were rejected by the gate"
            self.waiting_since = since.isoformat()
            return _Suspend(step)
        focus = self.focus(wf)
        missing = [
            local_name(p)
            for p in step.awaits
            if focus is None or self.world.value(focus, p) is None
        ]
        if missing:
            entry.reason = f"still waiting for {missing}"
            self.waiting_since = since.isoformat()
            return _Suspend(step)
        return _Edge("next", step.next)

    def subflow(
        self, wf: WorkflowDef, step: StepDef, entry: TraceEntry, key: str, depth: int
    ) -> _Body | _Ended:
        sub = self.ontology.workflows.get(step.workflow or "")
        if sub is None:
            return _Fail(f"{step.name} names no known workflow")
        if depth >= 1:
            return _Fail(f"{step.name}: subflows nest one level deep")
        entry.subflow = SubflowTrace(workflow=sub.name)
        nested = entry.subflow.trace
        ended = self.execute(sub, sub.starts_at, nested, prefix=key + "/", depth=depth + 1)
        return self.after_subflow(wf, step, entry, ended)

    def after_subflow(
        self, wf: WorkflowDef, step: StepDef, entry: TraceEntry, ended: _Ended
    ) -> _Body | _Ended:
        if ended.status == "suspended":
            ended.parent = {"workflow": wf.iri, "step": step.iri}
            return ended
        if ended.status == "failed":
            return _Fail(f"the subflow of {step.name} failed")
        if entry.subflow is None:
            entry.subflow = SubflowTrace()
        entry.subflow.terminal = local_name(ended.terminal or "")
        for outcome in step.outcomes:
            if outcome.terminal == ended.terminal:
                return _Edge("outcome", outcome.next)
        return _Edge("otherwise", step.otherwise)


def _requested(step: StepDef) -> dict[str, str]:
    """The step's own ``horis:model``, recorded next to the model that actually served it."""
    return {"requestedModel": step.model} if step.model else {}


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
    sub_step = parent.steps[suspended.parent["step"]]
    entry = run.trace[-1]
    if entry.subflow is None:
        entry.subflow = SubflowTrace()
    nested = entry.subflow.trace
    ended = run.execute(wf, suspended.step, nested, prefix=sub_step.name + "/", depth=1)
    body = run.after_subflow(parent, sub_step, entry, ended)
    if isinstance(body, _Ended):
        return _outcome(run, root, body)
    nxt = run.advance(sub_step, entry, body)
    if isinstance(nxt, _Ended):
        return _outcome(run, root, nxt)
    return _outcome(run, root, run.execute(parent, nxt, run.trace))


def _outcome(run: _Run, wf: WorkflowDef, ended: _Ended) -> Outcome:
    ontology, world = run.ontology, run.world
    focus = run.focus(wf)
    decision: dict[str, Any] | None = None
    proof: dict[str, Any] | None = None
    undecided: dict[str, Any] | None = None
    if run.undecided:
        held = world.value(focus, wf.decides) if focus and wf.decides else None
        prop = ontology.properties.get(wf.decides) if wf.decides else None
        undecided = {
            "property": local_name(wf.decides) if wf.decides else None,
            "propertyLabel": (prop.label or humanise(prop.name)) if prop else None,
            "held": show(ontology, held) if held is not None else None,
            "heldLabel": value_label(ontology, held) if held is not None else None,
            "inputs": run.undecided,
        }
    elif wf.decides is not None and focus is not None and ended.status == "completed":
        value = world.value(focus, wf.decides)
        if value is not None:
            decision = {"property": local_name(wf.decides), "value": show(ontology, value)}
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
        key=lambda row: json.dumps(row, default=str),
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
