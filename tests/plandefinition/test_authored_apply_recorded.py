"""The run that decides an authored plan's applicability conditions under ``$apply`` is a run
of the hook service like any other: stored with its proof, input and source versions
(``origin`` apply), named by the RequestGroup, shown on its page with the compiled plan's
labels, and replayed equal — in a process that never compiled the plan too, from the Turtle
kept in the store. A plan with nothing to decide records nothing."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.exc import OperationalError
from typer.testing import CliRunner

from app.cli import app as cli
from app.plandefinition import conditions, recorded
from tests.plandefinition.conftest import CPG
from tests.plandefinition.test_authored_apply import _discharge, _with_condition

OpenClient = Callable[..., AbstractContextManager[TestClient]]
URL = "/fhir/PlanDefinition/$apply"


@pytest.fixture
def client(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client(definition_paths=[CPG / "definitions"]) as opened:
        yield opened


def _decision(answer: Any) -> dict[str, Any]:
    assert answer.status_code == 200, answer.text
    group = answer.json()["entry"][0]["resource"]
    [found] = [e for e in group.get("extension", []) if e["url"].endswith("/decision")]
    decision: dict[str, Any] = json.loads(found["valueString"])
    return decision


def test_the_run_deciding_a_plans_conditions_is_recorded_and_replayed(
    client: TestClient, database_url: str
) -> None:
    decision = _decision(
        client.post(URL, json=_with_condition("%subject.name.given.first() = 'Alice'"))
    )
    assert decision["decision"] == {"property": "plan", "value": "Applied"}
    run_id = decision["runId"]

    stored = client.get(f"/runs/{run_id}")
    assert stored.status_code == 200, stored.text
    run = stored.json()
    assert run["origin"] == "apply"  # no clinician saw it: the record says so
    assert run["decision"] == decision["decision"]
    assert run["proof"] == decision["proof"]

    page = client.get(f"/runs/{run_id}", headers={"Accept": "text/html"})
    assert page.status_code == 200
    assert "Made by a <code>$apply</code> call" in page.text
    assert "Schedule follow-up visit applies: yes" in page.text  # the compiled labels

    replayed = client.post(f"/runs/{run_id}/replay")
    assert replayed.status_code == 200, replayed.text
    assert replayed.json()["same"] is True

    # a process that never compiled the plan replays it from the Turtle the store kept (its
    # folder of compiled plans gone, as a /tmp cleaner leaves it)
    shutil.rmtree(conditions._folder())
    again = client.post(f"/runs/{run_id}/replay")
    assert again.status_code == 200, again.text
    assert again.json()["same"] is True
    # and so does the command line, with the bundled deployments only
    result = CliRunner().invoke(cli, ["replay", run_id, "--url", database_url])
    assert result.exit_code == 0, result.output
    assert "same decision" in result.output


def test_an_undecided_condition_is_a_recorded_undecided_run(client: TestClient) -> None:
    decision = _decision(client.post(URL, json=_with_condition("%subject.birthDate < @2000-01-01")))
    assert "decision" not in decision
    run = client.get(f"/runs/{decision['runId']}").json()
    assert run["undecided"] == decision["undecided"]
    assert [i["state"] for i in run["undecided"]["inputs"]] == ["absent"]


def test_a_plan_with_nothing_to_decide_records_no_run(client: TestClient) -> None:
    answer = client.post(URL, json=_discharge())
    assert answer.status_code == 200, answer.text
    group = answer.json()["entry"][0]["resource"]
    assert not [e for e in group.get("extension", []) if e["url"].endswith("/decision")]


def test_plans_that_differ_only_in_their_id_are_kept_apart(client: TestClient) -> None:
    """The compiled deployment is named by a digest of its whole text: two inline plans
    without a url, the same conditions under other ids, are two deployments, each replayed on
    its own text."""
    runs = []
    for ident in ("follow-up-a", "follow-up-b"):
        body = _with_condition("%subject.name.given.first() = 'Alice'")
        plan = next(p["resource"] for p in body["parameter"] if p["name"] == "planDefinition")
        plan.pop("url", None)
        plan["id"] = ident
        runs.append(client.get(f"/runs/{_decision(client.post(URL, json=body))['runId']}").json())
    first, second = runs
    assert first["deployment"]["iri"] != second["deployment"]["iri"]
    for run in runs:
        assert client.post(f"/runs/{run['runId']}/replay").json()["same"] is True


def test_a_run_store_out_of_reach_is_a_503_operation_outcome(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unreachable(*_args: Any) -> None:
        raise OperationalError("INSERT", {}, Exception("connection refused"))

    monkeypatch.setattr(recorded, "keep_compiled_plan", unreachable)
    answer = client.post(URL, json=_with_condition("%subject.name.given.first() = 'Alice'"))
    assert answer.status_code == 503
    assert answer.headers["content-type"].startswith("application/fhir+json")
    assert answer.headers["retry-after"] == "5"
    [issue] = answer.json()["issue"]
    assert issue["code"] == "transient"
    assert "connection refused" not in issue["diagnostics"]  # the driver's words stay in the log
