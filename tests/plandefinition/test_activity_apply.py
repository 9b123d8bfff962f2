"""``POST /fhir/ActivityDefinition/$apply`` over real HTTP: the public CPG unit-test collection
(``tests/data/cpg-pd-apply``) — every fixture whose logic is FHIRPath answers its expected
request resource (compared structurally: ids and timestamps ignored), every fixture whose logic
is CQL is refused with an OperationOutcome naming the expression — and what the collection does
not exercise: a resource an expression reads that the data does not hold, a definition element
that would be dropped, a path the request type does not have, ``%name`` from ``parameters``."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.plandefinition.conftest import CPG, case, needs_cql, post
from tests.support.live_server import LiveServer

FIXTURES = CPG / "activitydefinition"
CASES = sorted(FIXTURES.glob("*.json"))
URL = "/fhir/ActivityDefinition/$apply"
#: identifiers and times a server assigns per call
PER_CALL = ("id", "date")


def _case(path: Path) -> dict[str, Any]:
    return case(path)


def _needs_cql(found: dict[str, Any]) -> bool:
    return needs_cql(found)


def _post(server: LiveServer, body: Any) -> httpx.Response:
    return post(server, URL, body)


def _without_per_call(resource: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in resource.items() if k not in PER_CALL}


@pytest.mark.parametrize(
    "path", [p for p in CASES if not _needs_cql(_case(p))], ids=lambda p: p.stem
)
def test_a_fhirpath_fixture_answers_its_expected_request(server: LiveServer, path: Path) -> None:
    case = _case(path)
    answer = _post(server, case["request"])
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("application/fhir+json")
    made = answer.json()
    assert made.get("id"), "the request made has an id of its own"
    assert _without_per_call(made) == _without_per_call(case["expected"])


@pytest.mark.parametrize("path", [p for p in CASES if _needs_cql(_case(p))], ids=lambda p: p.stem)
def test_a_cql_fixture_is_refused_naming_the_expression(server: LiveServer, path: Path) -> None:
    case = _case(path)
    answer = _post(server, case["request"])
    assert answer.status_code == 422
    [issue] = answer.json()["issue"]
    assert issue["code"] == "not-supported"
    definition = _definition(case["request"])
    cql = next(
        (i, dv)
        for i, dv in enumerate(definition["dynamicValue"])
        if dv["expression"]["language"].startswith("text/cql")
    )
    assert issue["expression"] == [f"ActivityDefinition.dynamicValue[{cql[0]}].expression"]
    assert cql[1]["expression"]["expression"] in issue["diagnostics"]


def test_the_collection_has_both_kinds_of_fixture() -> None:
    assert len([p for p in CASES if not _needs_cql(_case(p))]) == 9
    assert len([p for p in CASES if _needs_cql(_case(p))]) == 7


def _definition(body: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = next(
        p["resource"] for p in body["parameter"] if p["name"] == "activityDefinition"
    )
    return found


def _send_message() -> dict[str, Any]:
    return copy.deepcopy(_case(FIXTURES / "send-message.json")["request"])


def test_a_resource_an_expression_reads_must_be_in_the_data(server: LiveServer) -> None:
    body = _send_message()
    data = next(p["resource"] for p in body["parameter"] if p["name"] == "data")
    data["entry"] = [e for e in data["entry"] if e["resource"]["resourceType"] != "Practitioner"]
    answer = _post(server, body)
    assert answer.status_code == 422
    [issue] = answer.json()["issue"]
    assert issue["expression"] == ["ActivityDefinition.dynamicValue[0].expression"]
    assert "%practitioner" in issue["diagnostics"]
    assert "Practitioner/Practitioner1" in issue["diagnostics"]


def test_a_definition_element_it_would_drop_is_refused(server: LiveServer) -> None:
    body = _send_message()
    _definition(body)["timingTiming"] = {"repeat": {"frequency": 1, "period": 1, "periodUnit": "d"}}
    answer = _post(server, body)
    assert answer.status_code == 422
    [issue] = answer.json()["issue"]
    assert issue["expression"] == ["ActivityDefinition.timingTiming"]


def test_a_path_the_request_type_does_not_have_is_refused(server: LiveServer) -> None:
    body = _send_message()
    _definition(body)["dynamicValue"][0]["path"] = "payload[0].contentText"
    answer = _post(server, body)
    assert answer.status_code == 422
    [issue] = answer.json()["issue"]
    assert issue["expression"] == ["ActivityDefinition.dynamicValue[0].path"]
    assert "contentText" in issue["diagnostics"]


def test_a_parameter_is_read_as_a_variable_and_a_bad_expression_named(server: LiveServer) -> None:
    body = _send_message()
    definition = _definition(body)
    definition["dynamicValue"][0]["expression"]["expression"] = "'Reply by ' + %deadline"
    body["parameter"].append(
        {
            "name": "parameters",
            "resource": {
                "resourceType": "Parameters",
                "parameter": [{"name": "deadline", "valueString": "Friday"}],
            },
        }
    )
    answer = _post(server, body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["payload"] == [{"contentString": "Reply by Friday"}]

    definition["dynamicValue"][0]["expression"]["expression"] = "description +"
    answer = _post(server, body)
    assert answer.status_code == 422
    assert answer.json()["issue"][0]["expression"] == [
        "ActivityDefinition.dynamicValue[0].expression"
    ]


def test_no_definition_or_no_subject_is_a_400_naming_the_parameter(server: LiveServer) -> None:
    body = _send_message()
    body["parameter"] = [p for p in body["parameter"] if p["name"] != "subject"]
    answer = _post(server, body)
    assert answer.status_code == 400
    assert answer.json()["issue"][0]["expression"] == ["subject"]

    answer = _post(server, {"resourceType": "Parameters", "parameter": []})
    assert answer.status_code == 400
    assert answer.json()["issue"][0]["expression"] == ["activityDefinition"]


def test_metadata_lists_the_operation(server: LiveServer) -> None:
    statement = httpx.get(server.base + "/fhir/metadata", timeout=30).json()
    types = {r["type"]: r for r in statement["rest"][0]["resource"]}
    assert [o["name"] for o in types["ActivityDefinition"]["operation"]] == ["apply"]


def test_a_held_definition_applies_by_id_and_by_url_as_sent_inline(server: LiveServer) -> None:
    inline = _send_message()
    expected = _without_per_call(_post(server, inline).json())
    held = [p for p in inline["parameter"] if p["name"] != "activityDefinition"]

    by_id = post(
        server,
        "/fhir/ActivityDefinition/SendMessageActivity/$apply",
        {"resourceType": "Parameters", "parameter": held},
    )
    assert by_id.status_code == 200, by_id.text
    assert _without_per_call(by_id.json()) == expected

    url = {"name": "url", "valueUri": "http://example.org/ActivityDefinition/SendMessageActivity"}
    by_url = _post(server, {"resourceType": "Parameters", "parameter": [*held, url]})
    assert by_url.status_code == 200, by_url.text
    assert _without_per_call(by_url.json()) == expected

    unknown = post(
        server,
        "/fhir/ActivityDefinition/Nope/$apply",
        {"resourceType": "Parameters", "parameter": held},
    )
    assert unknown.status_code == 404
    assert unknown.json()["issue"][0]["expression"] == ["id"]
