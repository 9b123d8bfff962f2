"""Replay (docs/replay.md): re-execute a recorded run from its recorded input.

Recorded Bridge answers are substituted (the Bridge is never called), non-idempotent tool
results are substituted (the tool is never called), idempotent tools are re-run only when
``rerun_idempotent`` is set; everything symbolic — gate, rules, preconditions, transitions — is
executed again. The report lists divergences in decision, terminal, status, proof and facts.

Against a changed ontology the same replay is the regression check before a rule change ships:
:func:`compare_ontologies` replays many runs and lists those whose decision would change. A step
the recorded run never reached has nothing recorded: its Bridge calls fail as if no Bridge were
configured (its fallback is taken) and its tools are not called — a replay never reaches the
outside world through a path the recording did not cover. Replaying a run that suspended and
was resumed is not supported (the resume's facts are not part of the recording).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.ontology.model import Ontology
from app.runtime.context import Recording, RunContext, ToolPort
from app.runtime.interpreter import run_workflow
from app.runtime.outcome import Outcome
from app.world import World, WorldError
from app.world.inputs import InputStatus
from app.world.proof import proof_core


@dataclass(frozen=True, kw_only=True)
class RecordedRun:
    """What replay needs: the input World, the text, the run's time, its outcome, and for a hook
    run the input status its context carried (``InputStatus.to_json``)."""

    run_id: str
    workflow: str
    input_world: dict[str, Any]
    text: str | None
    now: str
    outcome: dict[str, Any]  # Outcome.to_json(), with its trace
    facts: list[list[Any]] = field(default_factory=list)
    inputs: list[dict[str, Any]] | None = None

    @classmethod
    def of(
        cls,
        outcome: Outcome,
        *,
        input_world: dict[str, Any],
        text: str | None,
        now: datetime,
        inputs: InputStatus | None = None,
    ) -> RecordedRun:
        return cls(
            run_id=outcome.run_id,
            workflow=outcome.workflow,
            input_world=input_world,
            text=text,
            now=now.isoformat(),
            outcome=outcome.to_json(),
            facts=outcome.facts,
            inputs=None if inputs is None else inputs.to_json(),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "runId": self.run_id,
            "workflow": self.workflow,
            "inputWorld": self.input_world,
            "text": self.text,
            "now": self.now,
            "outcome": self.outcome,
            "facts": self.facts,
        }
        if self.inputs is not None:
            out["inputs"] = self.inputs
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RecordedRun:
        return cls(
            run_id=str(data["runId"]),
            workflow=str(data["workflow"]),
            input_world=dict(data["inputWorld"]),
            text=data.get("text"),
            now=str(data["now"]),
            outcome=dict(data["outcome"]),
            facts=list(data.get("facts", [])),
            inputs=data.get("inputs"),
        )


@dataclass(frozen=True, kw_only=True)
class ReplayReport:
    run_id: str
    outcome: Outcome | None
    divergences: list[dict[str, Any]]
    error: str | None = None

    @property
    def same(self) -> bool:
        return self.error is None and not self.divergences

    @property
    def decision_changed(self) -> bool:
        return any(d["what"] in ("decision", "terminal") for d in self.divergences)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "runId": self.run_id,
            "same": self.same,
            "divergences": self.divergences,
        }
        if self.error is not None:
            out["error"] = self.error
        if self.outcome is not None:
            out["replayed"] = {
                "terminal": self.outcome.terminal,
                "decision": self.outcome.decision.to_json() if self.outcome.decision else None,
                "status": self.outcome.status,
            }
        return out


def replay_run(
    ontology: Ontology,
    recorded: RecordedRun,
    *,
    tools: ToolPort | None = None,
    rerun_idempotent: bool = False,
) -> ReplayReport:
    """Re-execute ``recorded`` on ``ontology`` and report how the result differs."""
    try:
        world = World.from_json(
            ontology, recorded.input_world, now=datetime.fromisoformat(recorded.now)
        )
    except WorldError as exc:
        return ReplayReport(
            run_id=recorded.run_id,
            outcome=None,
            divergences=[],
            error=f"{exc}: " + "; ".join(v.message for v in exc.violations),
        )
    ctx = RunContext(
        now=datetime.fromisoformat(recorded.now),
        bridge=None,
        tools=tools,
        text=recorded.text,
        run_id=recorded.run_id,
        recorded=Recording.from_trace(list(recorded.outcome.get("trace", []))),
        rerun_idempotent=rerun_idempotent,
        inputs=None if recorded.inputs is None else InputStatus.from_json(recorded.inputs),
    )
    try:
        outcome = run_workflow(ontology, recorded.workflow, world, ctx)
    except KeyError as exc:
        return ReplayReport(run_id=recorded.run_id, outcome=None, divergences=[], error=str(exc))
    return ReplayReport(
        run_id=recorded.run_id, outcome=outcome, divergences=_diverge(recorded, outcome)
    )


def _diverge(recorded: RecordedRun, outcome: Outcome) -> list[dict[str, Any]]:
    was = recorded.outcome
    now = outcome.to_json()
    out: list[dict[str, Any]] = []
    for what in ("decision", "terminal", "status"):
        if was.get(what) != now.get(what):
            out.append({"what": what, "recorded": was.get(what), "replayed": now.get(what)})
    if _blocked(was) != _blocked(now):  # which incomplete inputs kept it from deciding
        out.append(
            {
                "what": "undecided",
                "recorded": was.get("undecided"),
                "replayed": now.get("undecided"),
            }
        )
    if proof_core(was.get("proof")) != proof_core(now.get("proof")):  # labels aside
        out.append({"what": "proof", "recorded": was.get("proof"), "replayed": now.get("proof")})
    before = {_row(f) for f in recorded.facts}
    after = {_row(f) for f in outcome.facts}
    if before != after:
        out.append(
            {
                "what": "facts",
                "missing": sorted(list(r) for r in before - after),
                "extra": sorted(list(r) for r in after - before),
            }
        )
    return out


def _blocked(outcome: dict[str, Any]) -> list[str] | None:
    """The inputs an undecided outcome names (None for a decided run)."""
    undecided = outcome.get("undecided")
    if not isinstance(undecided, dict):
        return None
    return sorted(str(i.get("input")) for i in undecided.get("inputs") or ())


def _row(fact: Iterable[Any]) -> tuple[str, ...]:
    return tuple(str(x) for x in fact)


def compare_ontologies(
    ontology: Ontology, runs: Iterable[RecordedRun], *, tools: ToolPort | None = None
) -> list[ReplayReport]:
    """Replay every run against ``ontology`` (e.g. a candidate rule change); the reports whose
    ``decision_changed`` (or that no longer load) are the decisions the change would alter."""
    return [replay_run(ontology, run, tools=tools) for run in runs]
