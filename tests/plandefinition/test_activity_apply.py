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

from app.plandefinition.activity import Call, instantiate
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


def test_a_decimal_a_date_and_a_quantity_come_back_as_fhir_json(server: LiveServer) -> None:
    body = _send_message()
    definition = _definition(body)
    definition["dynamicValue"] = [
        {
            "path": "payload[0].contentString",
            "expression": _fhirpath("'half of 7: ' + (7 / 2).toString()"),
        },
        {"path": "occurrenceDateTime", "expression": _fhirpath("@2026-12-24")},
    ]
    answer = _post(server, body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["payload"] == [{"contentString": "half of 7: 3.5"}]
    assert answer.json()["occurrenceDateTime"] == "2026-12-24"

    body = copy.deepcopy(case(FIXTURES / "order-service.json")["request"])
    _definition(body)["dynamicValue"] = [
        {"path": "quantityQuantity", "expression": _fhirpath("7.5 'mg'")},
    ]
    answer = _post(server, body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["quantityQuantity"] == {
        "value": 7.5,
        "unit": "mg",
        "system": "http://unitsofmeasure.org",
        "code": "mg",
    }


def _fhirpath(expression: str) -> dict[str, str]:
    return {"language": "text/fhirpath", "expression": expression}


@pytest.mark.parametrize(
    ("change", "status", "where"),
    [
        ({"path": "payload[3].contentString"}, 422, "ActivityDefinition.dynamicValue[0].path"),
        ({"path": "requester.reference.x"}, 422, "ActivityDefinition.dynamicValue[0].path"),
    ],
    ids=["index-past-the-end", "through-a-primitive"],
)
def test_a_path_that_cannot_be_filled_is_refused_naming_it(
    server: LiveServer, change: dict[str, str], status: int, where: str
) -> None:
    body = _send_message()
    _definition(body)["dynamicValue"][0].update(change)
    answer = _post(server, body)
    assert answer.status_code == status, answer.text
    assert answer.json()["issue"][0]["expression"] == [where]


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"resourceType": "Parameters", "parameter": 5}, "parameter"),
        (
            {
                "resourceType": "Parameters",
                "parameter": [
                    {"name": "subject", "valueString": "Patient/p"},
                    {
                        "name": "data",
                        "resource": {"resourceType": "Bundle", "type": "collection", "entry": 3},
                    },
                ],
            },
            "data",
        ),
    ],
    ids=["parameter-not-a-list", "entry-not-a-list"],
)
def test_a_body_of_the_wrong_shape_is_a_400_naming_it(
    server: LiveServer, body: dict[str, Any], where: str
) -> None:
    if where == "data":
        body["parameter"].append(
            {"name": "activityDefinition", "resource": _definition(_send_message())}
        )
    answer = _post(server, body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["issue"][0]["expression"] == [where]


def test_a_parameter_named_like_a_call_resource_is_refused(server: LiveServer) -> None:
    body = _send_message()
    body["parameter"].append(
        {
            "name": "parameters",
            "resource": {
                "resourceType": "Parameters",
                "parameter": [{"name": "subject", "valueString": "someone else"}],
            },
        }
    )
    answer = _post(server, body)
    assert answer.status_code == 400
    assert answer.json()["issue"][0]["expression"] == ["parameters"]


def test_do_not_perform_on_a_request_that_cannot_say_it_is_refused(server: LiveServer) -> None:
    body = _send_message()
    definition = _definition(body)
    definition.update(kind="DeviceRequest", doNotPerform=True, dynamicValue=[])
    answer = _post(server, body)
    assert answer.status_code == 422
    assert answer.json()["issue"][0]["expression"] == ["ActivityDefinition.doNotPerform"]
    definition["doNotPerform"] = False
    assert _post(server, body).status_code == 200


def test_applying_a_definition_never_writes_into_it() -> None:
    definition = {
        "resourceType": "ActivityDefinition",
        "status": "active",
        "kind": "ServiceRequest",
        "code": {"text": "referral"},
        "dynamicValue": [
            {"path": "code.text", "expression": _fhirpath("%subject.name.given.first()")}
        ],
    }
    before = copy.deepcopy(definition)

    def for_patient(ident: str, name: list[dict[str, Any]]) -> dict[str, Any]:
        given = {
            "subject": f"Patient/{ident}",
            "data": {
                "resourceType": "Bundle",
                "type": "collection",
                "entry": [{"resource": {"resourceType": "Patient", "id": ident, "name": name}}],
            },
        }
        return instantiate(definition, Call.of(given))

    assert for_patient("ann", [{"given": ["Ann"]}])["code"] == {"text": "Ann"}
    assert for_patient("bob", [])["code"] == {"text": "referral"}
    assert definition == before
