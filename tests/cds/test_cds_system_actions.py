"""systemActions declared by a service (horis:systemAction), and a step's own horis:model, over
HTTP through the app's routes with a small test deployment (tests/data/cds/system_actions.ttl)."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from app.cds.response_check import check_response
from tests.cds import clinical as fx
from tests.support.fake_messages_api import fake_messages_api

ONTOLOGY = Path(__file__).parents[1] / "data/cds/system_actions.ttl"
BASE = "https://cds.example.test"
FLAGGED, PLAIN = "5640", "723"

OpenClient = Callable[..., AbstractContextManager[TestClient]]


def order_sign(*rxnorm: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    pid = "p-" + fx.new_id()
    orders = [fx.draft_order(pid, code) for code in rxnorm]
    body = fx.order_sign(pid, orders, fhir_server=None)
    return body, orders


def call(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    resp = client.post("/cds-services/sysact", json=body)
    assert resp.status_code == 200, resp.text
    answer: dict[str, Any] = resp.json()
    assert check_response(answer) == []
    return answer


def test_a_stopped_order_is_deleted_and_held_by_the_declared_system_actions(
    make_app_client: OpenClient,
) -> None:
    body, (flagged, plain) = order_sign(FLAGGED, PLAIN)
    with make_app_client(ontology_paths=[ONTOLOGY], public_base_url=BASE) as client:
        answer = call(client, body)
        again = call(client, body)  # the EHR retries the same hookInstance

    ref = f"MedicationRequest/{flagged['id']}"
    assert answer["systemActions"] == [
        {"type": "delete", "description": "Remove the flagged draft order.", "resourceId": ref},
        {
            "type": "update",
            "description": "Hold the flagged draft order.",
            "resourceId": ref,
            "resource": flagged,
        },
    ]
    # only the order the decision's proof rests on is acted upon, never the plain one
    assert f"MedicationRequest/{plain['id']}" not in json.dumps(answer["systemActions"])
    assert [c["summary"] for c in answer["cards"]] == ["Order stopped"]
    assert again["systemActions"] == answer["systemActions"]


def test_no_system_actions_when_no_declaration_matches_the_run(
    make_app_client: OpenClient,
) -> None:
    body, _ = order_sign(PLAIN)
    with make_app_client(ontology_paths=[ONTOLOGY], public_base_url=BASE) as client:
        answer = call(client, body)

    assert answer["extension"]["dev.horismos.run"]["decision"]["value"] == "Go"
    assert "systemActions" not in answer
    assert answer["cards"] == []


def _mock_script(tmp_path: Path) -> Path:
    script = tmp_path / "bridge.json"
    script.write_text(
        json.dumps({"narrate": [{"output": "Prose from the configured Bridge.", "confidence": 1}]})
    )
    return script


def _narration_calls(client: TestClient, run_id: str) -> list[dict[str, Any]]:
    trace = client.get(f"/runs/{run_id}").json()["trace"]
    (entry,) = [e for e in trace if e["kind"] == "NarrationStep"]
    calls: list[dict[str, Any]] = entry["calls"]
    return calls


def test_a_step_model_the_host_can_build_serves_that_step(
    make_app_client: OpenClient, tmp_path: Path
) -> None:
    body, _ = order_sign(FLAGGED)
    with fake_messages_api() as api:
        api.replies.append(
            {"tool_input": {"text": "Prose from the step's model.", "confidence": 1}}
        )
        with make_app_client(
            ontology_paths=[ONTOLOGY],
            public_base_url=BASE,
            bridge_model=f"mock:{_mock_script(tmp_path)}",
            anthropic_api_key="test-key",
            anthropic_base_url=api.base_url,
        ) as client:
            answer = call(client, body)
            run_id = answer["extension"]["dev.horismos.run"]["runId"]
            (narrate,) = _narration_calls(client, run_id)

    (request,) = api.requests
    assert request["body"]["model"] == "claude-step-model"
    assert "Prose from the step's model." in answer["cards"][0]["detail"]
    assert narrate["model"] == "claude:claude-step-model"
    assert narrate["requestedModel"] == "claude:claude-step-model"


def test_a_step_model_the_host_cannot_build_falls_back_to_the_configured_bridge(
    make_app_client: OpenClient, tmp_path: Path
) -> None:
    body, _ = order_sign(FLAGGED)
    script = _mock_script(tmp_path)
    with make_app_client(  # no Anthropic key: the step's claude: model cannot be built
        ontology_paths=[ONTOLOGY], public_base_url=BASE, bridge_model=f"mock:{script}"
    ) as client:
        answer = call(client, body)
        run_id = answer["extension"]["dev.horismos.run"]["runId"]
        (narrate,) = _narration_calls(client, run_id)

    assert "Prose from the configured Bridge." in answer["cards"][0]["detail"]
    assert narrate["model"] == f"mock:{script}"
    assert narrate["requestedModel"] == "claude:claude-step-model"
