"""The two shapes of a plan's ``$apply`` answer, over real HTTP on the public CPG collection:
``$r5.apply`` answers the CPG 2.0 Bundle as ``$apply`` does, and ``$apply`` with
``returnCarePlan`` answers base R4's CarePlan holding the same content (every resource
contained, every reference between them local, nothing dropped)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from fhir.resources.R4B.careplan import CarePlan

from tests.plandefinition.conftest import CPG, case, needs_cql, post
from tests.plandefinition.test_authored_apply import structure
from tests.support.live_server import LiveServer

FIXTURES = CPG / "plandefinition"
WITHOUT_CQL = [p for p in sorted(FIXTURES.glob("*.json")) if not needs_cql(case(p))]


def _with(request: dict[str, Any], **parameters: Any) -> dict[str, Any]:
    body = copy.deepcopy(request)
    for name, value in parameters.items():
        body["parameter"].append({"name": name, "valueBoolean": value})
    return body


def _as_bundle(plan: dict[str, Any]) -> dict[str, Any]:
    """The CarePlan's contained resources as the Bundle they came from: each local reference
    back to ``Type/id``, the RequestGroup (its activity) first."""
    kinds = {f"#{r['id']}": f"{r['resourceType']}/{r['id']}" for r in plan["contained"]}

    def back(value: Any) -> Any:
        if isinstance(value, dict):
            out = {k: back(v) for k, v in value.items()}
            if out.get("reference") in kinds:
                out["reference"] = kinds[out["reference"]]
            return out
        if isinstance(value, list):
            return [back(v) for v in value]
        return value

    first = plan["activity"][0]["reference"]["reference"]
    ordered = sorted(plan["contained"], key=lambda r: f"#{r['id']}" != first)
    return {"resourceType": "Bundle", "entry": [{"resource": back(r)} for r in ordered]}


@pytest.mark.parametrize("path", WITHOUT_CQL, ids=lambda p: p.stem)
def test_r5_apply_answers_the_expected_bundle(server: LiveServer, path: Path) -> None:
    found = case(path)
    answer = post(server, "/fhir/PlanDefinition/$r5.apply", found["request"])
    assert answer.status_code == 200, answer.text
    assert structure(answer.json()) == structure(found["expected"])


@pytest.mark.parametrize("path", WITHOUT_CQL, ids=lambda p: p.stem)
def test_a_care_plan_on_request_holds_what_the_bundle_holds(server: LiveServer, path: Path) -> None:
    found = case(path)
    answer = post(
        server, "/fhir/PlanDefinition/$apply", _with(found["request"], returnCarePlan=True)
    )
    assert answer.status_code == 200, answer.text
    plan = answer.json()
    CarePlan.model_validate(plan)
    assert (plan["status"], plan["intent"]) == ("draft", "proposal")
    group = plan["contained"][0]
    assert plan["activity"] == [{"reference": {"reference": f"#{group['id']}"}}]
    assert plan["subject"] == group["subject"]
    # every reference between the contained resources is local, and resolves
    local = {f"#{r['id']}" for r in plan["contained"]}
    text = str(plan)
    assert all(ref in local for ref in _references(plan) if ref.startswith("#"))
    assert "RequestGroup/" not in text
    assert structure(_as_bundle(plan)) == structure(found["expected"])
    goals = [r for r in plan["contained"] if r["resourceType"] == "Goal"]
    assert plan.get("goal", []) == [{"reference": f"#{g['id']}"} for g in goals]


def _references(value: Any) -> list[str]:
    if isinstance(value, dict):
        own = [value["reference"]] if isinstance(value.get("reference"), str) else []
        return own + [r for v in value.values() for r in _references(v)]
    if isinstance(value, list):
        return [r for v in value for r in _references(v)]
    return []


def test_the_collection_has_a_goal_and_a_nested_plan_to_carry() -> None:
    kinds = {str(case(p)["expected"]) for p in WITHOUT_CQL}
    assert any("'Goal'" in k for k in kinds)
    assert any("'intent': 'option'" in k for k in kinds)


def test_r5_apply_answers_a_bundle_only(server: LiveServer) -> None:
    request = case(FIXTURES / "discharge-instructions.json")["request"]
    answer = post(server, "/fhir/PlanDefinition/$r5.apply", _with(request, returnCarePlan=True))
    assert answer.status_code == 400
    [issue] = answer.json()["issue"]
    assert issue["expression"] == ["returnCarePlan"]


def test_return_care_plan_must_be_a_boolean(server: LiveServer) -> None:
    request = copy.deepcopy(case(FIXTURES / "discharge-instructions.json")["request"])
    request["parameter"].append({"name": "returnCarePlan", "valueString": "yes"})
    answer = post(server, "/fhir/PlanDefinition/$apply", request)
    assert answer.status_code == 400
    assert answer.json()["issue"][0]["expression"] == ["returnCarePlan"]
