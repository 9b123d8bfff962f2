"""A step's own horis:model: served by that model when the host can build it, else by the
host's configured Bridge; with no Bridge configured nothing changes. The trace says which model
served each call."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from fastapi.testclient import TestClient

from app.bridge import BridgeResolver, MockBridge
from app.ontology.model import Ontology
from app.runtime import Outcome, RunContext, run_workflow
from app.runtime.trace import TraceEntry
from app.settings import Settings
from tests.runtime.conftest import NOW, world_of
from tests.support.fake_messages_api import fake_messages_api

CASE = {"instances": [{"id": "c1", "class": "Case", "score": 70}]}
STEP_MODEL = "claude:claude-step-model"
SYSACT = Path(__file__).parents[1] / "data/cds/system_actions.ttl"


def run_with(flows: Ontology, resolver: BridgeResolver) -> Outcome:
    ctx = RunContext(now=NOW, bridge=resolver.default, bridge_for=resolver, run_id="run-1")
    return run_workflow(flows, "ExplainedByModel", world_of(flows, CASE), ctx)


def narration(outcome: Outcome) -> TraceEntry:
    return outcome.trace[0]


def default_mock() -> MockBridge:
    return MockBridge({"narrate": [{"output": "From the configured Bridge.", "confidence": 1}]})


def test_the_step_model_serves_the_step_when_the_host_has_its_key(flows: Ontology) -> None:
    default = default_mock()
    with fake_messages_api() as api:
        api.replies.append({"tool_input": {"text": "From the step's model.", "confidence": 0.9}})
        settings = Settings(anthropic_api_key="test-key", anthropic_base_url=api.base_url)
        outcome = run_with(flows, BridgeResolver(default, settings))

    (request,) = api.requests
    assert request["body"]["model"] == "claude-step-model"
    assert default.calls == []
    entry = narration(outcome)
    assert entry.narration is not None
    assert entry.narration.to_json() == {
        "text": "From the step's model.",
        "generated": True,
        "confidence": 0.9,
    }
    (call,) = entry.calls
    assert (call.model, call.requestedModel) == (STEP_MODEL, STEP_MODEL)


def test_without_the_key_the_configured_bridge_serves_the_step(flows: Ontology) -> None:
    default = default_mock()
    outcome = run_with(flows, BridgeResolver(default, Settings()))

    assert narration(outcome).narration.text == "From the configured Bridge."
    (call,) = narration(outcome).calls
    assert (call.model, call.requestedModel) == ("mock:", STEP_MODEL)
    assert len(default.calls) == 1


def test_with_no_bridge_configured_the_step_model_changes_nothing(flows: Ontology) -> None:
    with fake_messages_api() as api:
        settings = Settings(anthropic_api_key="test-key", anthropic_base_url=api.base_url)
        outcome = run_with(flows, BridgeResolver(None, settings))

    assert api.requests == []  # the deployment chose no LLM: the key alone does not add one
    entry = narration(outcome)
    assert entry.reason == "no Bridge configured"
    assert entry.narration is not None and entry.narration.generated is False
    assert outcome.terminal == "ExplainedByModelDone"


def test_a_mock_step_model_is_built_only_when_the_host_configures_a_mock(tmp_path: Path) -> None:
    script = tmp_path / "step.json"
    script.write_text(json.dumps({"narrate": [{"output": "scripted", "confidence": 1}]}))
    mocked = BridgeResolver(MockBridge(), Settings())
    step_bridge = mocked(f"mock:{script}")
    assert step_bridge is not None and step_bridge.model == f"mock:{script}"
    assert mocked(f"mock:{script}") is step_bridge  # built once, reused

    production = BridgeResolver.from_settings(
        Settings(bridge_model="claude:claude-default", anthropic_api_key="test-key")
    )
    assert production.default is not None
    assert production(f"mock:{script}") is production.default
    assert production(None) is production.default
    assert production("claude:claude-default") is production.default


def test_the_runs_api_serves_a_step_with_its_own_model(
    make_app_client: Callable[..., AbstractContextManager[TestClient]],
) -> None:
    data = {
        "instances": [
            {"id": "p1", "class": "Patient", "hasOrder": ["o1"]},
            {"id": "o1", "class": "Flagged"},
        ]
    }
    with fake_messages_api() as api:
        api.replies.append({"tool_input": {"text": "From the step's model.", "confidence": 1}})
        with make_app_client(
            ontology_paths=[SYSACT],
            bridge_model="mock:",
            anthropic_api_key="test-key",
            anthropic_base_url=api.base_url,
        ) as client:
            resp = client.post("/workflows/Check/runs", json=data)

    assert resp.status_code == 200, resp.text
    (entry,) = [e for e in resp.json()["trace"] if e["kind"] == "NarrationStep"]
    assert entry["narration"]["text"] == "From the step's model."
    assert entry["calls"][0]["model"] == STEP_MODEL
