"""NarrationStep: prose from the Bridge, the rendered proof without one, required narration."""

from __future__ import annotations

from app.bridge import MockBridge
from app.ontology.model import Ontology
from tests.runtime.conftest import run, steps

CASE = {"instances": [{"id": "c1", "class": "Case", "score": 70}]}


def test_narration_is_generated_from_the_proof_only(flows: Ontology) -> None:
    bridge = MockBridge(
        {"narrate": [{"output": "High, because the score is 70.", "confidence": 1}]}
    )
    outcome, world = run(flows, "Explained", CASE, bridge=bridge)

    assert outcome.terminal == "ExplainedDone"
    assert outcome.trace[0].narration.text == "High, because the score is 70."
    (request,) = bridge.calls
    assert request["proof"] == world.proof("c1", flows.namespace + "level").render()
    assert request["audience"] == "reviewer"


def test_a_required_narration_that_fails_follows_its_on_error_edge(flows: Ontology) -> None:
    bridge = MockBridge({"narrate": [{"error": "provider"}]})
    outcome, _ = run(flows, "Explained", CASE, bridge=bridge)

    # every run ends at a terminal step: the failure edge, not a failed run
    assert outcome.status == "completed"
    assert outcome.terminal == "ExplainFailed"
    assert steps(outcome) == [("ExplainLevel", "onError"), ("ExplainFailed", "next")]
    assert outcome.trace[0].narration.generated is False
    assert outcome.trace[0].required is True
    assert outcome.trace[0].reason.startswith("Bridge provider")


def test_a_required_narration_without_a_bridge_follows_its_on_error_edge(
    flows: Ontology,
) -> None:
    outcome, _ = run(flows, "Explained", CASE)

    assert (outcome.status, outcome.terminal) == ("completed", "ExplainFailed")
    assert outcome.trace[0].reason == "no Bridge configured"
    assert outcome.trace[0].edge == "onError"


def test_a_required_narration_that_succeeds_goes_on(flows: Ontology) -> None:
    bridge = MockBridge({"narrate": [{"output": "High.", "confidence": 1}]})
    outcome, _ = run(flows, "Explained", CASE, bridge=bridge)

    assert (outcome.status, outcome.terminal) == ("completed", "ExplainedDone")


def test_a_terminal_required_narration_that_fails_still_ends_the_run_there(
    flows: Ontology,
) -> None:
    outcome, _ = run(flows, "ExplainedLast", CASE)

    assert (outcome.status, outcome.terminal) == ("completed", "ExplainAndEnd")
    assert outcome.trace[0].required is True
    assert outcome.trace[0].narration.generated is False
