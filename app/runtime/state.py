"""What a run carries from step to step (its World, context, trace, goals and violations) and
what a step's body hands back to the interpreter: the edge to follow, a suspension or a failure,
or how the run (or a subflow of it) ended."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from app.ontology.model import Condition, Ontology, StepDef, WorkflowDef, local_name
from app.runtime.calls import ExternalCalls
from app.runtime.context import RunContext
from app.runtime.names import condition_json, show
from app.runtime.trace import TraceEntry, TraceFact
from app.world import World
from app.world.facts import Fact, TxResult


@dataclass
class Edge:
    """The edge a step's body selected, and the step it leads to (None where it has none)."""

    name: str  # next | fallback | onError | onUnreachable | onUnsatisfied | onTimeout | …
    target: str | None


@dataclass
class Suspend:
    step: StepDef


@dataclass
class Fail:
    message: str


Body = Edge | Suspend | Fail


@dataclass
class Ended:
    """How a run, or a subflow of it, ended; a suspended one says at which WaitStep."""

    status: Literal["completed", "suspended", "failed"]
    terminal: str | None = None
    wait: tuple[WorkflowDef, StepDef] | None = None
    parent: dict[str, str] | None = None


@dataclass
class RunState:
    """A run in progress: all that passes between steps is the World, the trace and these."""

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
