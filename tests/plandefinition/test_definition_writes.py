"""``PUT /fhir/{type}/{id}`` on each backend: a definition is checked as it would be applied,
stored as the next version of its id (none overwritten), and then applied by id, by url and by
``url|version``; what the service could not apply is refused with nothing stored; the service's
own definition files are not shadowed; with trusted issuers a write needs its scope."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from fastapi.testclient import TestClient

from app.plandefinition.writes import WRITE_SCOPE
from tests.plandefinition.conftest import CPG, case
from tests.support.client_jwt import ISSUERS, bearer

FHIR = {"Content-Type": "application/fhir+json"}
OpenClient = Callable[..., AbstractContextManager[TestClient]]
BASE = "https://cds.example.test"


def _plan() -> dict[str, Any]:
    request = case(CPG / "plandefinition/discharge-follow-up-plan.json")["request"]
    plan: dict[str, Any] = copy.deepcopy(
        next(p["resource"] for p in request["parameter"] if p["name"] == "planDefinition")
    )
    plan["id"] = "written-plan"
    plan["url"] = "http://example.org/PlanDefinition/WrittenPlan"
    return plan


def _call(**extra: Any) -> dict[str, Any]:
    request = case(CPG / "plandefinition/discharge-follow-up-plan.json")["request"]
    kept = [p for p in request["parameter"] if p["name"] in ("subject", "practitioner", "data")]
    return {
        "resourceType": "Parameters",
        "parameter": [*kept, *({"name": k, "valueUri": v} for k, v in extra.items())],
    }


def _put(client: TestClient, path: str, body: Any, **headers: str) -> Any:
    return client.put(f"/fhir/{path}", content=json.dumps(body), headers={**FHIR, **headers})


def test_a_written_plan_is_versioned_and_applied_by_id_url_and_version(
    app_client: TestClient,
) -> None:
    plan = _plan()
    first = _put(app_client, "PlanDefinition/written-plan", plan)
    assert first.status_code == 201, first.text
    assert first.json()["meta"]["versionId"] == "1"
    assert first.headers["etag"] == 'W/"1"'
    assert first.headers["location"].endswith("/fhir/PlanDefinition/written-plan/_history/1")

    second_plan = {**plan, "version": "0.2.0"}
    second_plan["action"] = [{**plan["action"][0], "title": "Monitor patient closely"}]
    second = _put(app_client, "PlanDefinition/written-plan", second_plan)
    assert second.status_code == 200, second.text
    assert second.json()["meta"]["versionId"] == "2"

    def first_title(answer: Any) -> str:
        assert answer.status_code == 200, answer.text
        return str(answer.json()["entry"][0]["resource"]["action"][0]["title"])

    by_id = app_client.post("/fhir/PlanDefinition/written-plan/$apply", json=_call())
    assert first_title(by_id) == "Monitor patient closely"
    url = "http://example.org/PlanDefinition/WrittenPlan"
    by_url = app_client.post("/fhir/PlanDefinition/$apply", json=_call(url=url))
    assert first_title(by_url) == "Monitor patient closely"
    older = app_client.post("/fhir/PlanDefinition/$apply", json=_call(url=f"{url}|0.1.0"))
    assert first_title(older) == "Monitor patient"
    read = app_client.get("/fhir/PlanDefinition/written-plan").json()
    assert read["meta"]["versionId"] == "2"


def test_what_could_not_be_applied_is_refused_and_nothing_stored(app_client: TestClient) -> None:
    plan = _plan()
    plan["action"][0]["condition"] = [
        {
            "kind": "applicability",
            "expression": {"language": "text/fhirpath", "expression": "%subject.nickname.exists()"},
        }
    ]
    refused = _put(app_client, "PlanDefinition/written-plan", plan)
    assert refused.status_code == 422
    assert refused.json()["issue"][0]["expression"] == ["PlanDefinition.action[0].condition[0]"]
    assert app_client.get("/fhir/PlanDefinition/written-plan").status_code == 404

    cql = {**_plan(), "library": ["http://example.org/Library/Logic"]}
    assert _put(app_client, "PlanDefinition/written-plan", cql).status_code == 422
    wrong_id = _put(app_client, "PlanDefinition/other", _plan())
    assert wrong_id.status_code == 400
    assert wrong_id.json()["issue"][0]["expression"] == ["id"]
    invalid = _put(app_client, "PlanDefinition/written-plan", {**_plan(), "status": 5})
    assert invalid.status_code == 400
    # a Library without its type is not valid R4; a type that is no definition is not stored
    library = _put(app_client, "Library/logic", {"resourceType": "Library", "status": "draft"})
    assert library.status_code == 400
    measure = _put(app_client, "Measure/m", {"resourceType": "Measure", "status": "draft"})
    assert measure.status_code == 422
    assert measure.json()["issue"][0]["expression"] == ["type"]
    activity = {
        "resourceType": "ActivityDefinition",
        "id": "no",
        "status": "draft",
        "kind": "Appointment",
    }
    refused_activity = _put(app_client, "ActivityDefinition/no", activity)
    assert refused_activity.status_code == 422
    assert refused_activity.json()["issue"][0]["expression"] == ["ActivityDefinition.kind"]
    assert app_client.get("/fhir/ActivityDefinition/no").status_code == 404


def test_a_written_plan_with_a_condition_applies_through_the_rules(app_client: TestClient) -> None:
    plan = _plan()
    plan["action"][0]["action"][1]["condition"] = [
        {
            "kind": "applicability",
            "expression": {
                "language": "text/fhirpath",
                "expression": "%subject.name.given.first() = 'Bob'",
            },
        }
    ]
    assert _put(app_client, "PlanDefinition/written-plan", plan).status_code == 201
    answer = app_client.post("/fhir/PlanDefinition/written-plan/$apply", json=_call())
    assert answer.status_code == 200, answer.text
    [monitor] = answer.json()["entry"][0]["resource"]["action"]
    assert [a["title"] for a in monitor["action"]] == ["Case management or referral"]


def test_the_definition_files_are_not_shadowed(make_app_client: OpenClient) -> None:
    with make_app_client(definition_paths=[CPG / "definitions"]) as client:
        held = client.get("/fhir/PlanDefinition/SendMessagePlan").json()
        answer = _put(client, "PlanDefinition/SendMessagePlan", held)
        assert answer.status_code == 409
        same_version = {**held, "id": "copy"}
        assert _put(client, "PlanDefinition/copy", same_version).status_code == 409


def _bearer(path: str, scope: str | None) -> dict[str, str]:
    return bearer(BASE + path, "author-1", scope)


def test_with_trusted_issuers_a_write_needs_its_scope(make_app_client: OpenClient) -> None:
    path = "/fhir/PlanDefinition/written-plan"
    with make_app_client(trusted_issuers=ISSUERS, public_base_url=BASE) as client:
        assert _put(client, "PlanDefinition/written-plan", _plan()).status_code == 401
        unscoped = _put(client, "PlanDefinition/written-plan", _plan(), **_bearer(path, None))
        assert unscoped.status_code == 403
        scoped = _put(client, "PlanDefinition/written-plan", _plan(), **_bearer(path, WRITE_SCOPE))
        assert scoped.status_code == 201, scoped.text


def test_a_write_may_not_take_a_served_id_a_file_url_or_a_long_url(
    make_app_client: OpenClient,
) -> None:
    with make_app_client(definition_paths=[CPG / "definitions"]) as client:
        served = {**_plan(), "id": "horismos-triage"}
        answer = _put(client, "PlanDefinition/horismos-triage", served)
        assert answer.status_code == 409
        assert "served CDS service" in answer.json()["issue"][0]["diagnostics"]
        held = client.get("/fhir/PlanDefinition/CKDEducationPlan").json()
        newer = {**held, "id": "ckd-newer", "version": "9.9"}
        answer = _put(client, "PlanDefinition/ckd-newer", newer)
        assert answer.status_code == 409
        assert answer.json()["issue"][0]["expression"] == ["PlanDefinition.url"]
        long_url = {**_plan(), "url": "http://example.org/" + "p" * 1000}
        assert _put(client, "PlanDefinition/written-plan", long_url).status_code == 400


def test_a_bare_url_answers_with_the_latest_write_of_an_id(app_client: TestClient) -> None:
    plan = _plan()
    assert _put(app_client, "PlanDefinition/written-plan", plan).status_code == 201
    moved = {**plan, "url": "http://example.org/PlanDefinition/Moved"}
    assert _put(app_client, "PlanDefinition/written-plan", moved).status_code == 200
    old = app_client.post(
        "/fhir/PlanDefinition/$apply",
        json=_call(url="http://example.org/PlanDefinition/WrittenPlan"),
    )
    assert old.status_code == 404
    new = app_client.post(
        "/fhir/PlanDefinition/$apply", json=_call(url="http://example.org/PlanDefinition/Moved")
    )
    assert new.status_code == 200, new.text


LIBRARY_TYPES = "http://terminology.hl7.org/CodeSystem/library-type"
LOGIC = {
    "resourceType": "Library",
    "url": "http://example.org/Library/FollowUpLogic",
    "version": "1.0.0",
    "status": "draft",
    "type": {"coding": [{"system": LIBRARY_TYPES, "code": "logic-library"}]},
    "content": [{"contentType": "text/cql", "data": "bGlicmFyeSBGb2xsb3dVcExvZ2lj"}],
}


def test_a_library_is_held_as_an_artifact_and_never_evaluated(app_client: TestClient) -> None:
    """An author's package of definitions holds its Library: stored and read back in every
    version, so the package is whole here, and still never run: a plan naming it is refused,
    and an action naming it as its definition is refused rather than read as a request."""
    first = _put(app_client, "Library/follow-up-logic", LOGIC)
    assert first.status_code == 201, first.text
    second = _put(app_client, "Library/follow-up-logic", {**LOGIC, "version": "1.1.0"})
    assert second.status_code == 200, second.text
    read = app_client.get("/fhir/Library/follow-up-logic").json()
    assert (read["version"], read["meta"]["versionId"]) == ("1.1.0", "2")
    assert read["content"] == LOGIC["content"]
    listed = app_client.get("/fhir/metadata").json()["rest"][0]["resource"]
    assert {"code": "update"} in next(r for r in listed if r["type"] == "Library")["interaction"]

    naming = {**_plan(), "library": [f"{LOGIC['url']}|1.1.0"]}
    refused = _put(app_client, "PlanDefinition/written-plan", naming)
    assert refused.status_code == 422
    assert refused.json()["issue"][0]["expression"] == ["PlanDefinition.library"]

    # the complete twin: the same plan without the library is stored and applies
    assert _put(app_client, "PlanDefinition/written-plan", _plan()).status_code == 201
    applied = app_client.post("/fhir/PlanDefinition/written-plan/$apply", json=_call())
    assert applied.status_code == 200, applied.text

    as_definition = _plan()
    as_definition["action"][0]["definitionCanonical"] = f"{LOGIC['url']}|1.0.0"
    assert _put(app_client, "PlanDefinition/written-plan", as_definition).status_code == 200
    wrong = app_client.post("/fhir/PlanDefinition/written-plan/$apply", json=_call())
    assert wrong.status_code == 422
    issue = wrong.json()["issue"][0]
    assert issue["expression"] == ["PlanDefinition.action[0].definitionCanonical"]
    assert "names a Library, which an action does not apply" in issue["diagnostics"]
