"""A run's result (docs/runtime.md, "Outcome and trace") and a suspended run's position."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.ontology.model import local_name
from app.runtime.documents import Decision, Undecided
from app.runtime.trace import TRACE_VERSION, TraceEntry, parse_trace, trace_json
from app.statuses import OutcomeStatus


@dataclass(frozen=True, kw_only=True)
class SuspendedRun:
    """Where a run waits (a WaitStep) and everything needed to continue it: serializable.

    ``parent`` is set when the WaitStep is inside a subflow: the parent workflow and the
    SubflowStep that will pick its edge from the subflow's terminal.
    """

    run_id: str
    workflow: str  # IRI of the workflow holding the WaitStep
    step: str  # IRI of the WaitStep
    waiting_since: str  # ISO time the run suspended (the run's clock)
    world: dict[str, Any]
    trace: list[TraceEntry]
    goals: list[bool] = field(default_factory=list)
    violations: list[dict[str, Any]] = field(default_factory=list)
    parent: dict[str, str] | None = None  # {"workflow": IRI, "step": IRI}
    root_workflow: str = ""  # the workflow the run was started with
    #: the incomplete inputs an earlier ReasoningStep found could change its goal
    undecided: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self, *, with_trace: bool = True) -> dict[str, Any]:
        """The JSON form; a store that keeps the trace elsewhere (``trace_events``) leaves it
        out (``with_trace=False``) and gives it back to :meth:`from_json`."""
        out: dict[str, Any] = {
            "runId": self.run_id,
            "workflow": self.workflow,
            "step": self.step,
            "waitingSince": self.waiting_since,
            "world": self.world,
            "goals": self.goals,
            "violations": self.violations,
            "parent": self.parent,
            "rootWorkflow": self.root_workflow or self.workflow,
        }
        if self.undecided:
            out["undecided"] = self.undecided
        if with_trace:
            out["trace"] = trace_json(self.trace)
        return out

    @classmethod
    def from_json(
        cls, data: dict[str, Any], *, trace: list[TraceEntry] | None = None
    ) -> SuspendedRun:
        return cls(
            run_id=str(data["runId"]),
            workflow=str(data["workflow"]),
            step=str(data["step"]),
            waiting_since=str(data["waitingSince"]),
            world=dict(data["world"]),
            trace=trace if trace is not None else parse_trace(data.get("trace") or []),
            goals=list(data.get("goals", [])),
            violations=list(data.get("violations", [])),
            parent=data.get("parent"),
            root_workflow=str(data.get("rootWorkflow") or data["workflow"]),
            undecided=list(data.get("undecided") or []),
        )


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What a run reports. ``decision`` (``{"property", "value"}``, local names) is for the
    workflow's ``horis:decides`` property when the run ends holding a value for it, else None.

    ``facts`` (the visible facts at the end, as ``[subject, property, value]`` with local names)
    is what replay compares; it is not part of ``to_json``.
    """

    run_id: str
    workflow: str
    version: str
    terminal: str | None
    decision: Decision | None
    goal_reached: bool
    proof: dict[str, Any] | None
    trace: list[TraceEntry]
    violations: list[dict[str, Any]]
    status: OutcomeStatus = "completed"
    suspended: SuspendedRun | None = None
    facts: list[list[Any]] = field(default_factory=list)
    #: a ReasoningStep's goal was not decided: the incomplete inputs that could change it (no
    #: ``decision`` then; ``undecided`` holds those inputs and the value held when it stopped)
    undecided: Undecided | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "runId": self.run_id,
            "workflow": self.workflow,
            "version": self.version,
            "status": self.status,
            "terminal": self.terminal,
        }
        if self.decision is not None:
            out["decision"] = self.decision.to_json()
        if self.undecided is not None:
            out["undecided"] = self.undecided.to_json()
        out.update(
            goal_reached=self.goal_reached,
            proof=self.proof,
            trace=trace_json(self.trace),
            traceVersion=TRACE_VERSION,
            violations=self.violations,
        )
        if self.suspended is not None:
            out["waitingAt"] = local_name(self.suspended.step)
        return out
