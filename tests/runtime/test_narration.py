"""NarrationStep: prose from the Bridge, the rendered proof without one, required narration."""

from __future__ import annotations

from app.bridge import MockBridge
from app.ontology.model import Ontology
from tests.runtime.conftest import run

CASE = {"instances": [{"id": "c1", "class": "Case", "score": 70}]}


def test_narration_is_generated_from_the_proof_only(flows: Ontology) -> None:
    bridge = MockBridge(
        {"narrate": [{"output": "High, because the score is 70.", "confidence": 1}]}
    )
    outcome, world = run(flows, "Explained", CASE, bridge=bridge)

    assert outcome.terminal == "ExplainedDone"
    assert outcome.trace[0]["narration"]["text"] == "High, because the score is 70."
    (request,) = bridge.calls
    assert request["proof"] == world.proof("c1", flows.namespace + "level").render()
    assert request["audience"] == "reviewer"


def test_a_required_narration_that_fails_fails_the_run(flows: Ontology) -> None:
    bridge = MockBridge({"narrate": [{"error": "provider"}]})
    outcome, _ = run(flows, "Explained", CASE, bridge=bridge)

    assert outcome.status == "failed"
    assert outcome.terminal is None and outcome.decision is None
    assert outcome.trace[0]["narration"]["generated"] is False
    assert any("required narration" in v["message"] for v in outcome.violations)


def test_a_required_narration_without_a_bridge_fails_the_run(flows: Ontology) -> None:
    outcome, _ = run(flows, "Explained", CASE)

    assert outcome.status == "failed"
    assert outcome.trace[0]["reason"] == "no Bridge configured"
