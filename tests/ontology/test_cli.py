"""``horismos verify`` and ``horismos schema`` as a user runs them."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from app.cli import app
from tests.ontology.conftest import DATA, TRIAGE

runner = CliRunner()


def test_verify_a_sound_ontology_exits_zero() -> None:
    result = runner.invoke(app, ["verify", str(TRIAGE)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ok: 1 file(s)")


def test_verify_the_bundled_ontologies_by_default() -> None:
    result = runner.invoke(app, ["verify"])
    assert result.exit_code == 0, result.output


def test_verify_prints_one_line_per_problem_and_exits_one() -> None:
    result = runner.invoke(app, ["verify", str(DATA / "verify_service_focus.ttl")])
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 3
    assert all(line.startswith("https://example.org/t#") for line in lines)
    assert "3 problem(s)" in result.stderr


def test_verify_reports_load_errors_the_same_way() -> None:
    result = runner.invoke(app, ["verify", str(DATA / "load_unknown_term.ttl")])
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "https://example.org/t#hr: horis:mx is not a Horismos term (see ontologies/horis.ttl); "
        "did you mean horis:max?"
    ]


def test_verify_a_missing_file() -> None:
    result = runner.invoke(app, ["verify", "no/such/file.ttl"])
    assert result.exit_code == 1
    assert "file not found" in result.stdout


def test_schema_prints_the_derived_json_schema() -> None:
    result = runner.invoke(app, ["schema", str(TRIAGE), "--extracts", "Patient", "Symptom"])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.stdout)
    variants = {v["title"]: v for v in schema["properties"]["instances"]["items"]["anyOf"]}
    assert "ChestPain" in variants["Symptom"]["properties"]["class"]["enum"]
    assert "acuity" not in result.stdout


def test_schema_with_repeated_option() -> None:
    result = runner.invoke(
        app, ["schema", str(TRIAGE), "--extracts", "Patient", "--extracts", "Symptom"]
    )
    assert result.exit_code == 0
    assert json.loads(result.stdout)["title"] == "Instances of Patient, Symptom"


def test_schema_of_an_unknown_class_fails() -> None:
    result = runner.invoke(app, ["schema", str(TRIAGE), "--extracts", "Heartburn"])
    assert result.exit_code == 1
    assert "Heartburn" in result.stderr
