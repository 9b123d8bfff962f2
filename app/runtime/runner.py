"""The Runner: the one host of every run — hook calls, the run routes, resume and the CLI.

It owns what a run receives from outside and what it leaves behind, so every host gets both the
same way:

- the **context** (:meth:`Runner.context`): the wall clock for the run's time and the trace's
  timestamps, a monotonic timer that measures every step and call (``elapsedMs``), the Bridge of
  each step's ``horis:model``, a fresh tool invoker per run (a hook registers its commit handler
  on it), and an optional deadline for the run's outside calls;
- the **record** (:meth:`Runner.record`): the run's row values and its outcome document, which
  carries the replay material (the World before the run, the text, the time) but not the trace:
  the trace is stored once, in ``trace_events``;
- **persistence** (:meth:`Runner.save`, :meth:`Runner.resume`): through the run store
  (``app.store.runs``), in the caller's transaction. A resume updates the run's outcome and
  trace and leaves everything else as stored — the hook response an EHR was given, the replay
  material, the data-quality notes.

The interpreter stays pure: it sees all of this only through :class:`RunContext`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from sqlalchemy import Connection, Engine

from app.bridge.protocol import Bridge
from app.errors import Conflict, NotFound
from app.ontology.model import Ontology, WorkflowDef
from app.ontology.workflows import WaitStep
from app.runtime.context import RunContext, ToolPort
from app.runtime.host import FactsRejected, InputRejected, find_workflow
from app.runtime.interpreter import resume_workflow, run_workflow
from app.runtime.names import namespace_of, qualify_structured
from app.runtime.outcome import Outcome, SuspendedRun
from app.runtime.replay import RecordedRun
from app.runtime.trace import parse_trace, trace_json
from app.store import repo
from app.store.run_rows import RunColumns
from app.store.runs import RunStore
from app.tools.invoker import ToolInvoker
from app.world import World, load_structured
from app.world.inputs import InputStatus

#: Keys of the outcome document a run's outcome sets; a resume replaces exactly these and
#: keeps every other key (``replay``, ``inputViolations``, ``dataQuality`` …).
OUTCOME_KEYS = frozenset(
    {
        "runId",
        "workflow",
        "version",
        "status",
        "terminal",
        "decision",
        "goal_reached",
        "proof",
        "trace",
        "violations",
        "waitingAt",
        "undecided",
    }
)

BridgeWrap = Callable[[Bridge | None], Bridge | None]


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _no_bridge(model: str | None) -> Bridge | None:
    return None


@dataclass(frozen=True, kw_only=True)
class StartedRun:
    """A run on structured input, before it is stored."""

    outcome: Outcome
    recorded: RecordedRun
    workflow: WorkflowDef


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """What one run stores: its row's columns and its trace as JSON entries."""

    values: dict[str, Any]
    trace: list[dict[str, Any]]


@dataclass(frozen=True, kw_only=True)
class Runner:
    """Builds every run's context and stores every run; shared by all runs of a process."""

    #: the Bridge serving a step's ``horis:model`` (``app.bridge.BridgeResolver``)
    bridges: Callable[[str | None], Bridge | None] = _no_bridge
    #: the configured Bridge (steps without ``horis:model``); None: no LLM
    default_bridge: Bridge | None = None
    #: a fresh tool invoker for one run
    invoker: Callable[[], ToolInvoker] = ToolInvoker
    clock: Callable[[], datetime] = _utcnow
    #: monotonic seconds (``time.monotonic``, the clock hook deadlines are set on): measures
    #: steps and calls, and holds the deadline
    timer: Callable[[], float] = time.monotonic
    #: seconds all of a run's tool calls may take together; None: each its own horis:timeout
    deadline: float | None = None

    @classmethod
    def from_settings(cls, settings: Any, *, tools: Any = None) -> Runner:
        """The Runner of a process: the settings' Bridge and the tool host's invokers."""
        from app.bridge import BridgeResolver

        resolver = BridgeResolver.from_settings(settings)
        invoker = getattr(tools, "invoker", None)
        return cls(
            bridges=resolver,
            default_bridge=resolver.default,
            invoker=invoker if callable(invoker) else ToolInvoker,
        )

    # --- the context ----------------------------------------------------------------------

    def context(
        self,
        *,
        run_id: str,
        now: datetime | None = None,
        text: str | None = None,
        tools: ToolPort | None = None,
        wrap_bridge: BridgeWrap | None = None,
        deadline: float | None = None,
        inputs: InputStatus | None = None,
    ) -> RunContext:
        """The context of one run. ``tools`` replaces the fresh invoker (a hook passes its
        own, wrapped); ``wrap_bridge`` wraps every Bridge the run may call (a hook's claim);
        ``deadline`` (on :attr:`timer`) is when the run's outside calls must be done by (a hook
        call's own deadline), else :attr:`deadline` seconds from now; ``inputs`` is what
        hydration could not read completely (a hook run's)."""
        wrap = wrap_bridge or (lambda bridge: bridge)
        resolve = self.bridges
        return RunContext(
            now=now or self.clock(),
            bridge=wrap(self.default_bridge),
            bridge_for=lambda model: wrap(resolve(model)),
            tools=tools if tools is not None else self.invoker(),
            text=text,
            run_id=run_id,
            clock=self.clock,
            timer=self.timer,
            deadline=deadline
            if deadline is not None or self.deadline is None
            else self.timer() + self.deadline,
            inputs=inputs,
        )

    # --- runs on structured input -----------------------------------------------------------

    def start(
        self,
        ontology: Ontology,
        workflow: str,
        data: Mapping[str, Any],
        *,
        text: str | None = None,
        run_id: str | None = None,
    ) -> StartedRun:
        """Load the structured input (provenance ``api``) and run ``workflow`` on it."""
        wf = find_workflow(ontology, workflow)
        now = self.clock()
        world = World(ontology, now=now)
        if data.get("instances"):
            qualified = qualify_structured(ontology, dict(data), namespace_of(wf.iri))
            tx = load_structured(world, qualified)
            if not tx.ok:
                raise InputRejected([v.to_json() for v in tx.violations])
        input_world = world.to_json()
        given = text if text is not None else data.get("text")
        ctx = self.context(
            run_id=run_id or str(uuid.uuid4()),
            now=now,
            text=given if isinstance(given, str) else None,
        )
        outcome = run_workflow(ontology, wf.iri, world, ctx)
        recorded = RecordedRun.of(outcome, input_world=input_world, text=ctx.text, now=ctx.now)
        return StartedRun(outcome=outcome, recorded=recorded, workflow=wf)

    # --- what a run stores ------------------------------------------------------------------

    def record(
        self, ontology: Ontology, recorded: RecordedRun, outcome: Outcome, **extra: Any
    ) -> RunRecord:
        """The run's row values and trace. The outcome document is the outcome without its
        trace (its ``traceVersion`` says how the trace reads), the replay material (``replay``)
        and the ``extra`` keys."""
        document = {k: v for k, v in recorded.outcome.items() if k != "trace"}
        material = recorded.to_json()
        material.pop("outcome")
        document["replay"] = material
        document.update(extra)
        trace = recorded.outcome.get("trace")
        return RunRecord(
            values=dict(outcome_columns(ontology, outcome, document)),
            trace=list(trace) if isinstance(trace, list) else trace_json(outcome.trace),
        )

    def save(
        self,
        connection: Connection,
        ontology: Ontology,
        run: StartedRun,
        *,
        row: Mapping[str, Any] | None = None,
    ) -> None:
        """Store a run on structured input (its row, outcome, trace) in the caller's
        transaction; ``row`` adds columns (a service, a deployment …)."""
        record = self.record(ontology, run.recorded, run.outcome)
        values = {
            "id": run.outcome.run_id,
            "workflow_iri": run.workflow.iri,
            "workflow_version": run.workflow.version,
            "ontology_digest": ontology.digest,
            **(row or {}),
            **record.values,
        }
        RunStore.of(connection.engine).save(connection, cast(RunColumns, values), record.trace)

    # --- resume ---------------------------------------------------------------------------

    def resume(
        self,
        engine: Engine,
        ontology_of: Callable[[Mapping[str, Any]], Ontology],
        run_id: str,
        facts: Mapping[str, Any],
        *,
        now: datetime | None = None,
    ) -> Outcome:
        """Continue a suspended run with structured facts, on the ontology ``ontology_of``
        gives for its stored row (its deployment's). The run's row stays locked from reading
        it to storing the outcome, so two concurrent resumes cannot both continue it (the
        second gets 409). The stored response, replay material and input status are kept, and
        the input status is the resumed run's context again."""
        moment = now or self.clock()
        with engine.begin() as connection:
            row = repo.lock_run(connection, run_id)
            if row is None:
                raise NotFound(where="runId", message=f"no run {run_id}")
            if row["status"] != "suspended":
                raise Conflict(
                    where="runId", message=f"run {run_id} is {row['status']}, not waiting"
                )
            ontology = ontology_of(row)
            trace = parse_trace(repo.trace_payloads(connection, run_id))
            suspended = suspended_run(ontology, row, trace)
            deadline = row["wait_deadline"] or wait_deadline(ontology, suspended)
            if deadline is not None and deadline.tzinfo is None:
                deadline = deadline.replace(tzinfo=UTC)
            if deadline is None or moment <= deadline:
                trial = World.from_json(ontology, suspended.world)
                tx = load_structured(trial, dict(facts), provenance="human")
                if not tx.ok:
                    raise FactsRejected([v.to_json() for v in tx.violations])
            stored_inputs = row.get("inputs")
            ctx = self.context(  # a hook run goes on knowing what its hydration could not read
                run_id=run_id,
                now=moment,
                inputs=None if stored_inputs is None else InputStatus.from_json(stored_inputs),
            )
            outcome = resume_workflow(ontology, suspended, dict(facts), ctx)
            stored = dict(row["outcome"] or {})
            document = {k: v for k, v in stored.items() if k not in OUTCOME_KEYS}
            document.update(outcome.to_json())
            entries = document.pop("trace")
            columns = outcome_columns(ontology, outcome, document)
            # a WaitStep inside a subflow continues the SubflowStep's entry: rewrite it too
            first = len(suspended.trace) - (1 if suspended.parent is not None else 0)
            RunStore.of(engine).resume(connection, run_id, columns, entries[first:], from_seq=first)
        return outcome


def outcome_columns(ontology: Ontology, outcome: Outcome, document: dict[str, Any]) -> RunColumns:
    """A run's columns for how it ended (or where it waits): its status, terminal, decision,
    outcome ``document`` and, suspended, its World, WaitStep and deadline."""
    suspended = outcome.suspended
    return {
        "status": outcome.status,
        "terminal": outcome.terminal,
        "decision": outcome.decision.to_json() if outcome.decision else None,
        "outcome": document,
        "world_state": suspended.to_json(with_trace=False) if suspended else None,
        "position": suspended.step if suspended else None,
        "wait_deadline": wait_deadline(ontology, suspended) if suspended else None,
    }


def wait_step(ontology: Ontology, step_iri: str) -> tuple[WorkflowDef, WaitStep]:
    """The WaitStep ``step_iri`` and its workflow, or 409 when the ontology lacks it."""
    for wf in ontology.workflows.values():
        step = wf.steps.get(step_iri)
        if isinstance(step, WaitStep):
            return wf, step
    raise Conflict(
        where="position",
        message=f"the run waits in {step_iri}, which the loaded ontology does not declare",
    )


def wait_deadline(ontology: Ontology, suspended: SuspendedRun) -> datetime | None:
    """When the WaitStep's ``horis:timeout`` passes (None without a timeout)."""
    _, step = wait_step(ontology, suspended.step)
    if step.timeout is None:
        return None
    since = datetime.fromisoformat(suspended.waiting_since)
    if since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    return since + timedelta(seconds=step.timeout)


def suspended_run(ontology: Ontology, row: Mapping[str, Any], trace: list[Any]) -> SuspendedRun:
    """A stored run's SuspendedRun: its stored state with its trace from ``trace_events``, or
    rebuilt from a stored World and position."""
    state = dict(row.get("world_state") or {})
    if "step" in state and "world" in state:
        return SuspendedRun.from_json(state, trace=trace)
    position = row.get("position")
    if not position:
        raise Conflict(where="position", message=f"run {row['id']} has no recorded wait position")
    wf, _ = wait_step(ontology, position)
    updated = row.get("updated_at")
    return SuspendedRun(
        run_id=str(row["id"]),
        workflow=wf.iri,
        step=position,
        waiting_since=updated.isoformat() if isinstance(updated, datetime) else "",
        world=state,
        trace=trace,
        root_workflow=str(row["workflow_iri"]),
    )


__all__ = [
    "OUTCOME_KEYS",
    "RunRecord",
    "Runner",
    "StartedRun",
    "suspended_run",
    "wait_deadline",
    "wait_step",
]
