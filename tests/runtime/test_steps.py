"""ChoiceStep, SubflowStep, ProposalStep (executed by a normal ActionStep) and WaitStep."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from app.bridge import MockBridge
from app.ontology.model import Ontology
from app.runtime import RunContext, SuspendedRun, resume_workflow
from app.tools import ToolInvoker
from tests.runtime.conftest import NOW, CountingTools, run, steps


def case(score: int, options: dict[str, bool] | None = None) -> dict[str, Any]:
    options = options or {}
    instances: list[dict[str, Any]] = [
        {"id": "c1", "class": "Case", "score": score, "hasOption": list(options)}
    ]
    instances += [{"id": o, "class": "Option", "available": a} for o, a in options.items()]
    return {"instances": instances}


OPTIONS = {"optA": True, "optB": True, "optC": False}


def ranked(*names: str, confidence: float = 0.9) -> MockBridge:
    return MockBridge({"rank": [{"output": list(names), "confidence": confidence}]})


def test_choice_takes_the_first_matching_branch_and_the_proposal_ranks_legal_candidates(
    flows: Ontology, invoker: ToolInvoker, counting: CountingTools
) -> None:
    bridge = ranked("optB", "optA")
    outcome, world = run(
        flows, "Flow", case(80, OPTIONS), bridge=bridge, tools=invoker, text="B please"
    )

    assert steps(outcome) == [
        ("Classify", "branch1"),
        ("PickOption", "next"),
        ("Book", "next"),
        ("Done", "next"),
    ]
    # optC is not available: it is not a candidate, and the model never saw it.
    assert bridge.calls[0]["candidates"] == ["optA", "optB"]
    assert bridge.calls[0]["text"] == "B please"
    assert world.value("c1", flows.namespace + "chosen") == "optB"
    # The chosen option is executed by the next ActionStep with arguments from the graph.
    assert counting.calls["book"] == [{"case": "c1", "option": "optB"}]
    assert world.value("c1", flows.namespace + "ticket") == "T-1"
    assert world.value("c1", flows.namespace + "bookedAt") is not None
    assert outcome.to_json().get("decision") == {"property": "level", "value": "High"}


def test_a_ranking_naming_a_non_candidate_is_rejected(
    flows: Ontology, invoker: ToolInvoker, counting: CountingTools
) -> None:
    outcome, world = run(flows, "Flow", case(80, OPTIONS), bridge=ranked("optC"), tools=invoker)

    pick = outcome.trace[1]
    assert pick.edge == "fallback" and "non-candidates" in pick.reason
    assert world.value("c1", flows.namespace + "chosen") is None
    assert counting.count("book") == 0
    assert outcome.status == "suspended"  # the fallback is a human (WaitStep)


def test_a_low_confidence_ranking_falls_back(flows: Ontology, invoker: ToolInvoker) -> None:
    outcome, _ = run(
        flows, "Flow", case(80, OPTIONS), bridge=ranked("optA", confidence=0.4), tools=invoker
    )
    assert outcome.trace[1].edge == "fallback"
    assert "below" in outcome.trace[1].reason


def test_no_bridge_proposal_falls_back_to_the_wait(flows: Ontology, invoker: ToolInvoker) -> None:
    outcome, _ = run(flows, "Flow", case(80, OPTIONS), tools=invoker)

    assert outcome.status == "suspended"
    assert outcome.terminal is None
    assert outcome.trace[-1].step == "AskHuman"
    assert outcome.to_json()["waitingAt"] == "AskHuman"


def suspended_run(flows: Ontology, invoker: ToolInvoker) -> SuspendedRun:
    outcome, _ = run(flows, "Flow", case(80, OPTIONS), tools=invoker)
    assert outcome.suspended is not None
    # A suspended run survives serialization (it is stored between requests).
    return SuspendedRun.from_json(json.loads(json.dumps(outcome.suspended.to_json())))


def test_resume_with_the_awaited_facts_continues(flows: Ontology, invoker: ToolInvoker) -> None:
    suspended = suspended_run(flows, invoker)
    ctx = RunContext(now=NOW + timedelta(minutes=10), tools=invoker, run_id="run-1")

    outcome = resume_workflow(
        flows, suspended, {"instances": [{"id": "c1", "approved": True}]}, ctx
    )

    assert outcome.status == "completed" and outcome.terminal == "Done"
    wait = outcome.trace[-2]
    assert wait.step == "AskHuman" and wait.edge == "next"
    assert wait.delta.added[0].provenance == "human"
    assert [e.step for e in outcome.trace].count("AskHuman") == 2  # suspended, then resumed


def test_resume_after_the_timeout_takes_on_timeout(flows: Ontology, invoker: ToolInvoker) -> None:
    suspended = suspended_run(flows, invoker)
    ctx = RunContext(now=NOW + timedelta(hours=2), tools=invoker, run_id="run-1")

    outcome = resume_workflow(
        flows, suspended, {"instances": [{"id": "c1", "approved": True}]}, ctx
    )

    assert outcome.terminal == "Failed"
    assert outcome.trace[-2].edge == "onTimeout"


def test_resume_with_rejected_facts_stays_suspended(flows: Ontology, invoker: ToolInvoker) -> None:
    suspended = suspended_run(flows, invoker)
    ctx = RunContext(now=NOW + timedelta(minutes=1), tools=invoker, run_id="run-1")

    outcome = resume_workflow(
        flows, suspended, {"instances": [{"id": "c1", "approved": "maybe"}]}, ctx
    )

    assert outcome.status == "suspended"
    assert outcome.trace[-1].violations


def test_subflow_terminal_selects_the_parent_edge(flows: Ontology, invoker: ToolInvoker) -> None:
    passed, _ = run(flows, "Flow", case(30), tools=invoker)
    failed, _ = run(flows, "Flow", case(5), tools=invoker)

    assert steps(passed) == [("Classify", "otherwise"), ("LowPath", "outcome"), ("Done", "next")]
    nested = passed.trace[1].subflow
    assert nested is not None
    assert nested.workflow == "Check" and nested.terminal == "CheckPassed"
    assert [e.step for e in nested.trace] == ["CheckScore", "CheckPassed"]
    assert passed.terminal == "Done"
    assert steps(failed)[1] == ("LowPath", "otherwise")
    assert failed.terminal == "Failed"
    assert failed.to_json().get("decision") == {"property": "level", "value": "Low"}


def test_a_wait_inside_a_subflow_resumes_into_the_parent(
    flows: Ontology, invoker: ToolInvoker
) -> None:
    outcome, _ = run(flows, "Outer", case(30), tools=invoker)
    assert outcome.status == "suspended" and outcome.suspended is not None
    suspended = SuspendedRun.from_json(json.loads(json.dumps(outcome.suspended.to_json())))
    assert suspended.parent is not None

    on_time = resume_workflow(
        flows,
        suspended,
        {"instances": [{"id": "c1", "approved": True}]},
        RunContext(now=NOW + timedelta(seconds=10), tools=invoker, run_id="run-1"),
    )
    late = resume_workflow(
        flows,
        suspended,
        {"instances": [{"id": "c1", "approved": True}]},
        RunContext(now=NOW + timedelta(minutes=5), tools=invoker, run_id="run-1"),
    )

    assert on_time.terminal == "OuterDone"
    nested = on_time.trace[0].subflow
    assert nested is not None
    assert [e.step for e in nested.trace] == [
        "AwaitApproval",
        "AwaitApproval",
        "ApprovalGiven",
    ]
    assert late.terminal == "OuterFailed"  # the subflow ended at ApprovalLapsed: no outcome matched
