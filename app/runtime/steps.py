"""The body of each step kind, and the table the interpreter dispatches through
(:data:`STEP_BODIES`): a step kind the table does not name (a plain ``horis:Step``) has no body
and follows ``next``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from app.bridge.protocol import BridgeError, BridgeResult, schema_hash
from app.ontology.model import ToolDef, WorkflowDef, local_name
from app.ontology.workflows import (
    ActionStep,
    ChoiceStep,
    NarrationStep,
    PerceptionStep,
    ProposalStep,
    ReasoningStep,
    StepBase,
    SubflowStep,
    WaitStep,
)
from app.runtime.effects import ContractError, effect_changes, resolve_args
from app.runtime.names import namespace_of, qualify_structured, show
from app.runtime.perception import extraction_changes
from app.runtime.state import Body, Edge, Ended, Fail, RunState, Suspend
from app.runtime.trace import ConditionCheck, Narration, Resumed, SubflowTrace, TraceEntry
from app.runtime.undecided import undecided_json
from app.tools.errors import EffectNotExecuted, ToolError
from app.world.facts import Assert

PERCEPTION_RETRIES = 2


S = TypeVar("S", bound=StepBase)


@dataclass(frozen=True)
class StepAt(Generic[S]):
    """The step a body runs, where: its workflow, its trace entry, its key in the run (a
    subflow's steps under ``step/``), the focus, and how deep in subflows it is."""

    wf: WorkflowDef
    step: S
    entry: TraceEntry
    key: str
    focus: str | None
    depth: int


class StepBodies(RunState):
    """The step bodies of a run; the interpreter's loop (``app.runtime.interpreter``) runs
    them, and a subflow's body runs that loop again, one level down."""

    if TYPE_CHECKING:

        def execute(
            self,
            wf: WorkflowDef,
            start: str,
            trace: list[TraceEntry],
            *,
            prefix: str = "",
            depth: int = 0,
        ) -> Ended: ...

    def reason(self, at: StepAt[ReasoningStep]) -> Body:
        """Evaluate the goal; a goal that an incomplete input could change is *undecided*: the
        step takes ``horis:onIncomplete`` (else ``onUnreachable``) and names those inputs."""
        step, entry, focus = at.step, at.entry, at.focus
        holds = focus is not None and self.world.holds(focus, step.goal)
        entry.goal = ConditionCheck(conditions=self.conds(step.goal), holds=holds)
        inputs = self.ctx.inputs
        blockers = (
            self.world.undecided(focus, step.goal, inputs.incomplete(), inputs.incomplete_records())
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
                return Edge("onIncomplete", step.on_incomplete)
            return Edge("onUnreachable", step.on_unreachable)
        self.goals.append(holds)
        return Edge("next", step.next) if holds else Edge("onUnreachable", step.on_unreachable)

    def perceive(self, at: StepAt[PerceptionStep]) -> Body:
        wf, step, entry, key, focus = at.wf, at.step, at.entry, at.key, at.focus
        text = self.ctx.text
        if not text:
            entry.skipped = "no input text"
            return Edge("next", step.next)
        bridge = self.ctx.bridge_of(step.model)
        if bridge is None and self.ctx.recorded is None:
            entry.reason = "no Bridge configured"
            return Edge("fallback", step.fallback)
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
                return Edge("fallback", step.fallback)
            if result.confidence < threshold:
                entry.reason = f"confidence {result.confidence} below {threshold}"
                return Edge("fallback", step.fallback)
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
                return Edge("next", step.next)
            feedback = [v.to_json() for v in tx.violations]
        entry.attempts = budget + 1
        entry.reason = "the extraction still failed validation after its retries"
        return Edge("fallback", step.fallback)

    def act(self, at: StepAt[ActionStep]) -> Body:
        step, entry, key, focus = at.step, at.entry, at.key, at.focus
        tool = self.ontology.tools.get(step.tool or "")
        if tool is None:
            return Fail(f"{step.name} names no known tool")
        entry.tool = tool.name
        if not step.for_each:
            return self.invoke(step, tool, entry, key, focus, record_args=True)
        instances = self.each_instance(step, focus)
        entry.instances = instances
        for instance in instances:
            body = self.invoke(step, tool, entry, key, instance, record_args=False)
            if body.name != "next":
                return body
        return Edge("next", step.next)

    def each_instance(self, step: ActionStep, focus: str | None) -> list[str]:
        """The instances a ``horis:forEach`` step calls its tool for, each once, in the order
        the paths reach them (hydration's order, so a replay takes its calls in the same order)."""
        return self.world.each(focus, step.for_each, step.each_where)

    def invoke(
        self,
        step: ActionStep,
        tool: ToolDef,
        entry: TraceEntry,
        key: str,
        focus: str | None,
        *,
        record_args: bool,
    ) -> Edge:
        """One call of the step's tool on ``focus`` (the run's focus, or a forEach instance)."""
        try:
            args = resolve_args(self.ontology, self.world, focus, step, tool)
        except ContractError as exc:
            entry.error = str(exc)
            return Edge("onError", step.on_error)
        if record_args:
            entry.args = args
        if self.undecided and tool.commits is not None and not tool.commits.is_message:
            # an undecided run writes nothing back to the record; a message to a clinician
            # still goes, so that somebody hears of it
            entry.effect = "refused"
            entry.reason = "not written back: the decision was not reached (incomplete inputs)"
            return Edge("next", step.next)
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
                return Edge("next", step.next)
            except ToolError as exc:
                entry.error = exc.message
                if exc.retryable and attempt < budget:
                    continue
                entry.attempts = attempt + 1
                return Edge("onError", step.on_error)
            entry.attempts = attempt + 1
            try:
                changes = effect_changes(
                    self.ontology, self.world, tool, raw, focus=focus, now=self.ctx.now
                )
            except ContractError as exc:
                entry.error = str(exc)
                return Edge("onError", step.on_error)
            tx = self.world.transact(changes, provenance="tool")
            self.record_tx(entry, tx)
            if not tx.ok:
                entry.error = "the tool's effects were rejected by the gate"
                return Edge("onError", step.on_error)
            entry.unset("error")
            return Edge("next", step.next)
        return Edge("onError", step.on_error)

    def narrate(self, at: StepAt[NarrationStep]) -> Body:
        step, entry, key, focus = at.step, at.entry, at.key, at.focus
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
                return Edge("next", step.next)
            except BridgeError as exc:
                entry.reason = f"Bridge {exc.kind}: {exc.message}"
        entry.narration = Narration(text=rendered, generated=False)
        return self.narration_failed(step, entry)

    def narration_failed(self, step: NarrationStep, entry: TraceEntry) -> Body:
        if not step.required:
            return Edge("next", step.next)
        entry.required = True
        if step.on_error:
            return Edge("onError", step.on_error)
        if step.terminal:  # the run ends here all the same; the trace says the narration failed
            return Edge("onError", None)
        return Fail(f"the required narration of {step.name} failed")

    def propose(self, at: StepAt[ProposalStep]) -> Body:
        step, entry, key, focus = at.step, at.entry, at.key, at.focus
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
            return Edge("fallback", step.fallback)
        bridge = self.ctx.bridge_of(step.model)
        if bridge is None and self.ctx.recorded is None:
            entry.reason = "no Bridge configured"
            return Edge("fallback", step.fallback)
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
            return Edge("fallback", step.fallback)
        invented = [c for c in ranked.output if c not in by_name]
        if not ranked.output or invented:
            entry.reason = (
                f"the ranking names non-candidates {invented}"
                if invented
                else ("the ranking is empty")
            )
            return Edge("fallback", step.fallback)
        threshold = step.confidence if step.confidence is not None else 0.0
        if ranked.confidence < threshold:
            entry.reason = f"confidence {ranked.confidence} below {threshold}"
            return Edge("fallback", step.fallback)
        choice = ranked.output[0]
        entry.selected = choice
        if focus is None or step.selects is None:
            return Fail(f"{step.name} has no focus property to record its selection on")
        tx = self.world.transact(
            [Assert(focus, step.selects, by_name[choice])],
            provenance="perception",
            confidence=ranked.confidence,
        )
        self.record_tx(entry, tx)
        if not tx.ok:
            entry.reason = "the selection was rejected by the gate"
            return Edge("fallback", step.fallback)
        return Edge("next", step.next)

    def choose(self, at: StepAt[ChoiceStep]) -> Body:
        """The first branch whose ``horis:when`` holds on the focus, else ``otherwise``."""
        step, entry, focus = at.step, at.entry, at.focus
        for i, branch in enumerate(step.branches, start=1):
            if focus is not None and self.world.holds(focus, branch.when):
                entry.branch = i
                return Edge(f"branch{i}", branch.next)
        return Edge("otherwise", step.otherwise)

    def wait(self, at: StepAt[WaitStep]) -> Body:
        wf, step, entry = at.wf, at.step, at.entry
        facts = self.resume_facts
        if facts is None:
            entry.awaits = [local_name(p) for p in step.awaits]
            self.waiting_since = self.ctx.now.isoformat()
            return Suspend(step)
        self.resume_facts = None
        since = datetime.fromisoformat(self.waiting_since or self.ctx.now.isoformat())
        waited = (self.ctx.now - since).total_seconds()
        entry.resumed = Resumed(waitedSeconds=waited)
        if step.timeout is not None and waited > step.timeout:
            entry.reason = f"resumed after {waited}s, past the {step.timeout}s timeout"
            return Edge("onTimeout", step.on_timeout)
        from app.world import load_structured

        qualified = qualify_structured(self.ontology, facts, namespace_of(wf.iri))
        tx = load_structured(self.world, qualified, provenance="human")
        self.record_tx(entry, tx)
        if not tx.ok:
            entry.reason = "the resume's facts were rejected by the gate"
            self.waiting_since = since.isoformat()
            return Suspend(step)
        focus = self.focus(wf)
        missing = [
            local_name(p)
            for p in step.awaits
            if focus is None or self.world.value(focus, p) is None
        ]
        if missing:
            entry.reason = f"still waiting for {missing}"
            self.waiting_since = since.isoformat()
            return Suspend(step)
        return Edge("next", step.next)

    def subflow(self, at: StepAt[SubflowStep]) -> Body | Ended:
        wf, step, entry, key, depth = at.wf, at.step, at.entry, at.key, at.depth
        sub = self.ontology.workflows.get(step.workflow or "")
        if sub is None:
            return Fail(f"{step.name} names no known workflow")
        if depth >= 1:
            return Fail(f"{step.name}: subflows nest one level deep")
        entry.subflow = SubflowTrace(workflow=sub.name)
        nested = entry.subflow.trace
        ended = self.execute(sub, sub.starts_at, nested, prefix=key + "/", depth=depth + 1)
        return self.after_subflow(wf, step, entry, ended)

    def after_subflow(
        self, wf: WorkflowDef, step: SubflowStep, entry: TraceEntry, ended: Ended
    ) -> Body | Ended:
        if ended.status == "suspended":
            ended.parent = {"workflow": wf.iri, "step": step.iri}
            return ended
        if ended.status == "failed":
            return Fail(f"the subflow of {step.name} failed")
        if entry.subflow is None:
            entry.subflow = SubflowTrace()
        entry.subflow.terminal = local_name(ended.terminal or "")
        for outcome in step.outcomes:
            if outcome.terminal == ended.terminal:
                return Edge("outcome", outcome.next)
        return Edge("otherwise", step.otherwise)


def _requested(step: PerceptionStep | NarrationStep | ProposalStep) -> dict[str, str]:
    """The step's own ``horis:model``, recorded next to the model that actually served it."""
    return {"requestedModel": step.model} if step.model else {}


#: one body per step class: a new kind adds its class (app/ontology/workflows.py) and its body here
STEP_BODIES: Mapping[type[StepBase], Callable[[StepBodies, Any], Body | Ended]] = {
    PerceptionStep: StepBodies.perceive,
    ReasoningStep: StepBodies.reason,
    ActionStep: StepBodies.act,
    NarrationStep: StepBodies.narrate,
    ProposalStep: StepBodies.propose,
    WaitStep: StepBodies.wait,
    ChoiceStep: StepBodies.choose,
    SubflowStep: StepBodies.subflow,
}
