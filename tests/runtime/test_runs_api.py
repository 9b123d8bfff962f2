"""Runs through the HTTP API (persisted) and the ``horismos run`` / ``horismos replay`` commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import app as cli
from app.main import create_app
from app.settings import Settings
from tests.runtime.conftest import CHEST_PAIN, ROOT, TRIAGE


def test_a_run_is_answered_persisted_and_replayable(client: TestClient) -> None:
    answer = client.post("/workflows/Triage/runs", json=CHEST_PAIN)

    assert answer.status_code == 200, answer.text
    outcome = answer.json()
    assert outcome["terminal"] == "Done"
    assert outcome["decision"] == {"property": "acuity", "value": "Immediate"}
    assert outcome["workflow"] == "Triage" and outcome["version"] == "1.3.0"
    assert [e["step"] for e in outcome["trace"]] == ["Intake", "Assess", "Route", "Explain", "Done"]
    assert outcome["proof"]

    stored = client.get(f"/runs/{outcome['runId']}")
    assert stored.status_code == 200
    assert stored.json() == outcome

    replayed = client.post(f"/runs/{outcome['runId']}/replay")
    assert replayed.status_code == 200
    assert replayed.json()["same"] is True
    assert replayed.json()["replayed"]["decision"] == outcome["decision"]


def test_no_data_escalates_through_the_api(client: TestClient) -> None:
    answer = client.post("/workflows/Triage/runs", json={"instances": []})

    assert answer.status_code == 200
    assert answer.json()["terminal"] == "EscalateToNurse"
    assert "decision" not in answer.json()


def test_rejected_input_and_unknown_names_are_client_errors(client: TestClient) -> None:
    bad = client.post(
        "/workflows/Triage/runs",
        json={"instances": [{"id": "p1", "class": "Patient", "heartRate": 900}]},
    )
    assert bad.status_code == 400
    assert bad.json()["violations"][0]["code"] == "max"
    assert client.post("/workflows/Nope/runs", json={}).status_code == 404
    assert client.get("/runs/no-such-run").status_code == 404


def test_horismos_run_prints_the_outcome_json(tmp_path: Path) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(CHEST_PAIN))

    result = CliRunner().invoke(
        cli, ["run", str(TRIAGE), "--workflow", "Triage", "--facts", str(facts), "--json"]
    )

    assert result.exit_code == 0, result.output
    outcome: dict[str, Any] = json.loads(result.stdout)
    assert result.stderr == f"run {outcome['runId']}: NOT stored " + (
        "(--save stores it for GET /runs/{id} and horismos replay)\n"
    )
    assert outcome["decision"] == {"property": "acuity", "value": "Immediate"}
    assert outcome["terminal"] == "Done"


def test_horismos_run_refuses_an_ontology_that_does_not_verify(tmp_path: Path) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(CHEST_PAIN))
    unsound = ROOT / "tests" / "data" / "ontology" / "verify_cycle.ttl"

    result = CliRunner().invoke(
        cli, ["run", str(unsound), "--workflow", "Flow", "--facts", str(facts), "--json"]
    )

    assert result.exit_code == 1
    assert "acyclic" in result.output


def test_horismos_replay_reads_the_database(client: TestClient, database_url: str) -> None:
    run_id = client.post("/workflows/Triage/runs", json=CHEST_PAIN).json()["runId"]

    result = CliRunner().invoke(
        cli, ["replay", run_id, "--url", database_url, "--ontology", str(TRIAGE)]
    )

    assert result.exit_code == 0, result.output
    assert "same decision" in result.output


def test_local_names_resolve_in_the_workflow_namespace_with_every_deployment_loaded(
    app_client: TestClient,
) -> None:
    # The bundled ontologies are loaded together: ``Patient`` exists in more than one of them.
    answer = app_client.post("/workflows/Triage/runs", json=CHEST_PAIN)

    assert answer.status_code == 200, answer.text
    assert answer.json()["decision"] == {"property": "acuity", "value": "Immediate"}


def test_a_mock_bridge_configured_by_settings_perceives_the_request_text(
    make_app_client: Callable[..., AbstractContextManager[TestClient]], tmp_path: Path
) -> None:
    script = tmp_path / "bridge.json"
    extraction = {
        "instances": [
            {"id": "pt", "class": "Patient", "hasSymptom": ["d"]},
            {"id": "d", "class": "Dyspnea"},
        ]
    }
    script.write_text(json.dumps({"extract": [{"output": extraction, "confidence": 0.9}]}))

    with make_app_client(ontology_paths=[TRIAGE], bridge_model=f"mock:{script}") as client:
        answer = client.post(
            "/workflows/Triage/runs",
            json={"instances": [{"id": "p1", "class": "Patient"}], "text": "short of breath"},
        )

    assert answer.status_code == 200, answer.text
    outcome = answer.json()
    assert outcome["decision"] == {"property": "acuity", "value": "Urgent"}
    (call,) = outcome["trace"][0]["calls"]
    assert call["op"] == "extract" and call["model"] == f"mock:{script}"


def _horismos(*args: str, database_url: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HORISMOS_")}
    return subprocess.run(
        [sys.executable, "-c", "from app.cli import main; main()", *args],
        cwd=cwd,
        env={**env, "HORISMOS_DATABASE_URL": database_url},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_horismos_run_says_plainly_whether_the_run_was_stored(tmp_path: Path) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(CHEST_PAIN))
    database = tmp_path / "fresh.db"  # never migrated: --save migrates the SQLite file
    url = f"sqlite:///{database}"
    run = ["run", str(TRIAGE), "--workflow", "Triage", "--facts", str(facts)]

    unsaved = _horismos(*run, database_url=url, cwd=tmp_path)
    assert unsaved.returncode == 0, unsaved.stderr
    assert unsaved.stdout.splitlines()[-1].startswith("NOT stored")
    assert not database.exists()

    saved = _horismos(*run, "--save", "--json", database_url=url, cwd=tmp_path)
    assert saved.returncode == 0, saved.stderr
    outcome = json.loads(saved.stdout)
    assert f"run {outcome['runId']}: stored in sqlite" in saved.stderr
    assert f"GET /runs/{outcome['runId']}" in saved.stderr

    settings = Settings(database_url=url, ontology_paths=[TRIAGE])
    with TestClient(create_app(settings)) as client:
        stored = client.get(f"/runs/{outcome['runId']}")
    assert stored.status_code == 200
    assert stored.json()["decision"] == outcome["decision"]
    assert stored.json()["proof"] == outcome["proof"]
