"""Replay: recorded Bridge answers and non-idempotent tool results are substituted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.bridge import Bridge, MockBridge
from app.ontology import load_ontology
from app.ontology.model import Ontology
from app.runtime import RunContext, run_workflow
from app.runtime.replay import RecordedRun, compare_ontologies, replay_run
from app.tools import ToolInvoker
from app.world.proof import proof_core
from tests.runtime.conftest import DATA, NOW, TRIAGE, CountingTools, world_of

OPTIONS = {
    "instances": [
        {"id": "c1", "class": "Case", "score": 80, "hasOption": ["optA", "optB"]},
        {"id": "optA", "class": "Option", "available": True},
        {"id": "optB", "class": "Option", "available": True},
    ]
}


def record(
    ontology: Ontology,
    workflow: str,
    data: dict[str, Any],
    *,
    bridge: Bridge | None = None,
    tools: ToolInvoker | None = None,
    text: str | None = None,
    run_id: str = "run-1",
) -> RecordedRun:
    world = world_of(ontology, data)
    before = world.to_json()
    ctx = RunContext(now=NOW, bridge=bridge, tools=tools, text=text, run_id=run_id)
    outcome = run_workflow(ontology, workflow, world, ctx)
    recorded = RecordedRun.of(outcome, input_world=before, text=text, now=NOW)
    # What is stored is JSON: replay must work from that alone.
    return RecordedRun.from_json(json.loads(json.dumps(recorded.to_json(), default=str)))


def test_replay_reproduces_without_the_bridge_or_the_non_idempotent_tool(
    flows: Ontology, invoker: ToolInvoker, counting: CountingTools
) -> None:
    bridge = MockBridge({"rank": [{"output": ["optB", "optA"], "confidence": 0.9}]})
    recorded = record(flows, "Flow", OPTIONS, bridge=bridge, tools=invoker, text="B")
    assert counting.count("book") == 1 and len(bridge.calls) == 1

    report = replay_run(flows, recorded, tools=invoker)

    assert report.same, report.divergences
    assert report.outcome is not None
    assert report.outcome.to_json().get("decision") == recorded.outcome["decision"]
    assert report.outcome.terminal == "Done"
    assert report.outcome.proof == recorded.outcome["proof"]
    assert counting.count("book") == 1  # the booking tool was not invoked again
    assert len(bridge.calls) == 1  # nor was the model
    calls = [c for e in report.outcome.trace for c in e.calls]
    assert calls and all(c.substituted for c in calls)


def test_replay_of_a_perceived_triage_run(triage: Ontology) -> None:
    bridge = MockBridge(
        {
            "extract": [
                {
                    "output": {
                        "instances": [
                            {"id": "pt", "class": "Patient", "hasSymptom": ["c"]},
                            {"id": "c", "class": "Dyspnea"},
                        ]
                    },
                    "confidence": 0.95,
                }
            ],
            "narrate": [{"output": "Short of breath: urgent.", "confidence": 1}],
        }
    )
    data = {"instances": [{"id": "p1", "class": "Patient"}]}
    recorded = record(triage, "Triage", data, bridge=bridge, tools=ToolInvoker(), text="SOB")

    report = replay_run(triage, recorded)

    assert report.same, report.divergences
    assert report.outcome is not None
    assert report.outcome.to_json().get("decision") == {"property": "acuity", "value": "Urgent"}
    assert len(bridge.calls) == 2


def test_idempotent_tools_rerun_only_when_asked(
    flows: Ontology, invoker: ToolInvoker, counting: CountingTools
) -> None:
    recorded = record(flows, "Lookup", OPTIONS, tools=invoker)
    assert counting.count("lookup") == 1

    assert replay_run(flows, recorded, tools=invoker).same
    assert counting.count("lookup") == 1
    assert replay_run(flows, recorded, tools=invoker, rerun_idempotent=True).same
    assert counting.count("lookup") == 2


def test_a_relabelled_criterion_or_a_proof_stored_without_labels_is_no_divergence(
    triage: Ontology, tmp_path: Path
) -> None:
    """Labels only say how a reader sees a proof: a run stored before proofs carried them, or
    replayed after a criterion's rdfs:label was reworded, reproduces; a changed rule does not."""
    data = {"instances": [{"id": "p1", "class": "Patient", "heartRate": 160}]}
    recorded = record(triage, "Triage", data, tools=ToolInvoker())
    stripped = json.loads(json.dumps(recorded.to_json()))
    stripped["outcome"]["proof"] = proof_core(stripped["outcome"]["proof"])
    older = RecordedRun.from_json(stripped)
    assert "name" not in json.dumps(older.outcome["proof"])

    assert replay_run(triage, older).same
    source = TRIAGE.read_text()
    reworded = tmp_path / "triage.ttl"
    reworded.write_text(source.replace('"Heart rate above 150 /min"', '"Pulse over 150"'))
    report = replay_run(load_ontology([reworded]), recorded)
    assert report.same, report.divergences
    assert report.outcome is not None
    assert "Pulse over 150" in json.dumps(report.outcome.to_json()["proof"])


def test_a_changed_ontology_lists_the_decisions_that_would_change(
    flows: Ontology, invoker: ToolInvoker, counting: CountingTools, tmp_path: Path
) -> None:
    def case(score: int) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(json.dumps(OPTIONS))
        data["instances"][0]["score"] = score
        return data

    def ranking() -> MockBridge:
        return MockBridge({"rank": [{"output": ["optA"], "confidence": 0.9}]})

    runs = [
        record(flows, "Flow", case(score), bridge=ranking(), tools=invoker, run_id=f"r{score}")
        for score in (60, 30, 5)
    ]
    assert [r.outcome["terminal"] for r in runs] == ["Done", "Done", "Failed"]
    stricter = tmp_path / "flows.ttl"
    stricter.write_text(
        (DATA / "flows.ttl")
        .read_text()
        .replace("horis:atLeast 50", "horis:atLeast 70")
        .replace("horis:lessThan 50", "horis:lessThan 70")
    )
    changed = load_ontology([stricter], registry=counting.registry("book", "issue", "lookup"))

    reports = compare_ontologies(changed, runs, tools=invoker)

    assert [r.run_id for r in reports if r.decision_changed] == ["r60"]
    (r60,) = [r for r in reports if r.run_id == "r60"]
    decision = next(d for d in r60.divergences if d["what"] == "decision")
    assert decision["recorded"]["value"] == "High" and decision["replayed"]["value"] == "Low"
    assert any(d["what"] == "facts" for d in r60.divergences)
    assert all(r.same for r in reports if r.run_id != "r60")
