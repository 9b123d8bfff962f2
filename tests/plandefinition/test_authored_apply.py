"""``POST /fhir/PlanDefinition/$apply`` on authored plans, over real HTTP: the public CPG
unit-test collection (``tests/data/cpg-pd-apply/plandefinition``) — every plan whose logic
needs no CQL answers its expected Bundle (compared structurally: ids, fullUrls and times
ignored, a reference compared by what it points at), every plan naming a CQL library is refused
with an OperationOutcome naming it — and what the collection does not exercise: an
definition the service does not hold, an action element the RequestGroup would lose, a plan
held by the service applied by id and by url, a served CDS service still applied by its id;
applicability conditions in FHIRPath decided by the rules they compile to (true keeps the
action, false drops it, unknown names it), and those this host cannot decide refused."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.plandefinition.conftest import CPG, case, needs_cql, post
from tests.support.live_server import LiveServer

FIXTURES = CPG / "plandefinition"
CASES = sorted(FIXTURES.glob("*.json"))
URL = "/fhir/PlanDefinition/$apply"
PER_CALL = ("id", "fullUrl", "date", "authoredOn")


def structure(bundle: dict[str, Any]) -> tuple[Any, list[str]]:
    """The Bundle's first resource with every reference to a resource of the Bundle replaced by
    that resource (per-call identifiers dropped), and the sorted types of all entries."""
    held = {
        f"{e['resource']['resourceType']}/{e['resource']['id']}": e["resource"]
        for e in bundle["entry"]
    }

    def resolved(value: Any) -> Any:
        if isinstance(value, dict):
            if set(value) == {"reference"} and value["reference"] in held:
                return resolved(held[value["reference"]])
            return {k: resolved(v) for k, v in value.items() if k not in PER_CALL}
        if isinstance(value, list):
            return [resolved(v) for v in value]
        return value

    types = sorted(e["resource"]["resourceType"] for e in bundle["entry"])
    return resolved(bundle["entry"][0]["resource"]), types


@pytest.mark.parametrize("path", [p for p in CASES if not needs_cql(case(p))], ids=lambda p: p.stem)
def test_a_plan_without_cql_answers_its_expected_bundle(server: LiveServer, path: Path) -> None:
    found = case(path)
    answer = post(server, URL, found["request"])
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("application/fhir+json")
    bundle = answer.json()
    assert bundle["resourceType"] == "Bundle"
    assert bundle["entry"][0]["resource"]["resourceType"] == "RequestGroup"
    assert structure(bundle) == structure(found["expected"])


@pytest.mark.parametrize("path", [p for p in CASES if needs_cql(case(p))], ids=lambda p: p.stem)
def test_a_plan_naming_a_cql_library_is_refused_naming_it(server: LiveServer, path: Path) -> None:
    answer = post(server, URL, case(path)["request"])
    assert answer.status_code == 422
    [issue] = answer.json()["issue"]
    assert issue["code"] == "not-supported"
    assert issue["expression"] == ["PlanDefinition.library"]
    assert "CQL" in issue["diagnostics"]


def test_the_collection_has_both_kinds_of_plan() -> None:
    assert len([p for p in CASES if not needs_cql(case(p))]) == 8
    assert len([p for p in CASES if needs_cql(case(p))]) == 5


def _discharge() -> dict[str, Any]:
    return copy.deepcopy(case(FIXTURES / "discharge-follow-up-plan.json")["request"])


def _plan(body: dict[str, Any]) -> dict[str, Any]:
    plan: dict[str, Any] = next(
        p["resource"] for p in body["parameter"] if p["name"] == "planDefinition"
    )
    return plan


def _with_condition(expression: str, *, kind: str = "applicability") -> dict[str, Any]:
    body = _discharge()
    _plan(body)["action"][0]["action"][1]["condition"] = [
        {"kind": kind, "expression": {"language": "text/fhirpath", "expression": expression}}
    ]
    return body


def _titles(answer: httpx.Response) -> list[str]:
    assert answer.status_code == 200, answer.text
    [monitor] = answer.json()["entry"][0]["resource"]["action"]
    return [a["title"] for a in monitor.get("action", [])]


def _extensions(answer: httpx.Response) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for e in answer.json()["entry"][0]["resource"].get("extension", []):
        found.setdefault(e["url"].rsplit("/", 1)[1], []).append(e.get("valueString", ""))
    return found


def test_an_applicability_condition_true_keeps_its_action_false_drops_it(
    server: LiveServer,
) -> None:
    true = post(server, URL, _with_condition("%subject.name.given.first() = 'Alice'"))
    assert _titles(true) == ["Case management or referral", "Schedule follow-up visit"]
    [decision] = _extensions(true)["decision"]
    assert json.loads(decision)["decision"] == {"property": "plan", "value": "Applied"}
    assert json.loads(decision)["proof"]["property"] == "plan"

    false = post(server, URL, _with_condition("%subject.name.given.first() = 'Bob'"))
    assert _titles(false) == ["Case management or referral"]
    assert "undecided-action" not in _extensions(false)


def test_a_condition_the_data_cannot_answer_is_undecided_and_named(server: LiveServer) -> None:
    answer = post(server, URL, _with_condition("%subject.birthDate < @2000-01-01"))
    assert _titles(answer) == ["Case management or referral"]
    found = _extensions(answer)
    assert found["undecided-action"] == [
        "PlanDefinition.action[0].action[1]: Schedule follow-up visit"
    ]
    [decision] = found["decision"]
    inputs = json.loads(decision)["undecided"]["inputs"]
    assert [i["state"] for i in inputs] == ["absent"]

    body = _with_condition("%subject.birthDate < @2000-01-01")
    data = next(p["resource"] for p in body["parameter"] if p["name"] == "data")
    patient = next(
        e["resource"] for e in data["entry"] if e["resource"]["resourceType"] == "Patient"
    )
    patient["birthDate"] = "1950-05-05"
    decided = post(server, URL, body)
    assert _titles(decided) == ["Case management or referral", "Schedule follow-up visit"]
    assert "undecided-action" not in _extensions(decided)


@pytest.mark.parametrize(
    ("expression", "kind", "words"),
    [
        ("%subject.birthDate < today() - 18 years", "applicability", "reads the clock"),
        ("%organization.active", "applicability", "%organization"),
        (
            "%subject.active and %encounter.status = 'finished'",
            "applicability",
            "reads both the subject and the encounter",
        ),
        ("name.where(given = %subject.name.given.first()).exists()", "applicability", "%subject"),
        ("%subject.active", "when-ever", "R4 defines applicability, start and stop"),
        ("%subject.nickname.exists()", "applicability", "does not compile into rules"),
        ("%subject.active /* ) */ and %subject.gender = 'male'", "applicability", "comment"),
        ("%subject.name.given.single() = 'Alice'", "applicability", "single()"),
    ],
    ids=[
        "clock",
        "other-variable",
        "subject-and-encounter",
        "subject-inside-a-function",
        "unknown-kind",
        "not-an-element",
        "comment",
        "single",
    ],
)
def test_a_condition_this_host_cannot_decide_is_refused_naming_it(
    server: LiveServer, expression: str, kind: str, words: str
) -> None:
    answer = post(server, URL, _with_condition(expression, kind=kind))
    assert answer.status_code == 422, answer.text
    [issue] = answer.json()["issue"]
    assert words in issue["diagnostics"]
    assert issue["expression"][0].startswith("PlanDefinition.action")


def test_start_and_stop_conditions_are_carried_onto_the_request_group_not_decided(
    server: LiveServer,
) -> None:
    """When an action starts or stops is for the system carrying the plan out: $apply keeps
    the action and hands both conditions on as written, beside an applicability condition it
    does decide."""
    body = _with_condition("%subject.name.given.first() = 'Alice'")
    follow_up = _plan(body)["action"][0]["action"][1]
    start = {
        "kind": "start",
        "expression": {"language": "text/fhirpath", "expression": "%context.status = 'finished'"},
    }
    stop = {"kind": "stop", "expression": {"language": "text/fhirpath", "expression": "false"}}
    unwritten = {"kind": "stop"}  # R4 lets a condition go without an expression: carried too
    follow_up["condition"] += [start, stop, unwritten]
    answer = post(server, URL, body)
    assert _titles(answer) == ["Case management or referral", "Schedule follow-up visit"]
    [monitor] = answer.json()["entry"][0]["resource"]["action"]
    assert monitor["action"][1]["condition"] == [start, stop, unwritten]
    assert "condition" not in monitor["action"][0]
    assert json.loads(_extensions(answer)["decision"][0])["decision"]["value"] == "Applied"

    # the applicability condition still decides: false drops the action, its start with it
    body = _with_condition("%subject.name.given.first() = 'Bob'")
    _plan(body)["action"][0]["action"][1]["condition"] += [start]
    assert _titles(post(server, URL, body)) == ["Case management or referral"]

    # a start condition alone: nothing to decide, the action kept with it
    body = _with_condition("%context.status = 'finished'", kind="start")
    answer = post(server, URL, body)
    assert _titles(answer) == ["Case management or referral", "Schedule follow-up visit"]
    assert "decision" not in _extensions(answer)


def test_a_condition_reads_the_encounter_the_call_names(server: LiveServer) -> None:
    """%encounter is the call's encounter from the data: an ambulatory visit is not an
    inpatient stay (false drops the action), is an ambulatory one (true keeps it); without the
    encounter in the data the condition is unknown and named, never false."""
    ambulatory = post(server, URL, _with_condition("%encounter.class.code = 'AMB'"))
    assert _titles(ambulatory) == ["Case management or referral", "Schedule follow-up visit"]
    inpatient = post(server, URL, _with_condition("%encounter.class.code = 'IMP'"))
    assert _titles(inpatient) == ["Case management or referral"]
    assert "undecided-action" not in _extensions(inpatient)

    body = _with_condition("%encounter.class.code = 'AMB'")
    data = next(p["resource"] for p in body["parameter"] if p["name"] == "data")
    data["entry"] = [e for e in data["entry"] if e["resource"]["resourceType"] != "Encounter"]
    unknown = post(server, URL, body)
    assert _titles(unknown) == ["Case management or referral"]
    assert _extensions(unknown)["undecided-action"] == [
        "PlanDefinition.action[0].action[1]: Schedule follow-up visit"
    ]

    # an encounter parameter that names something else is the caller's mistake, named
    body = _with_condition("%encounter.class.code = 'AMB'")
    for parameter in body["parameter"]:
        if parameter["name"] == "encounter":
            parameter["valueString"] = "Observation/Inference1"
    wrong = post(server, URL, body)
    assert wrong.status_code == 400, wrong.text
    [issue] = wrong.json()["issue"]
    assert issue["expression"] == ["encounter"]


def _related(expression: str) -> dict[str, Any]:
    """The follow-up plan, its case management to start after the follow-up visit (which has
    an applicability condition) and with the monitoring itself."""
    body = _with_condition(expression)
    monitor = _plan(body)["action"][0]
    monitor["id"] = "monitor"
    case, visit = monitor["action"]
    case["id"], visit["id"] = "case-management", "follow-up-visit"
    case["relatedAction"] = [
        {
            "actionId": "follow-up-visit",
            "relationship": "after-end",
            "offsetDuration": {"value": 2, "unit": "d", "system": "http://unitsofmeasure.org"},
        },
        {"actionId": "monitor", "relationship": "concurrent-with-start"},
    ]
    return body


def test_related_actions_are_carried_and_a_relation_to_an_action_left_out_goes(
    server: LiveServer,
) -> None:
    body = _related("%subject.name.given.first() = 'Alice'")
    written = _plan(body)["action"][0]["action"][0]["relatedAction"]
    answer = post(server, URL, body)
    assert _titles(answer) == ["Case management or referral", "Schedule follow-up visit"]
    [monitor] = answer.json()["entry"][0]["resource"]["action"]
    assert monitor["action"][0]["relatedAction"] == written  # as the plan wrote it

    # the visit's condition false: the visit is not in the RequestGroup, nor a relation to it
    answer = post(server, URL, _related("%subject.name.given.first() = 'Bob'"))
    assert _titles(answer) == ["Case management or referral"]
    [monitor] = answer.json()["entry"][0]["resource"]["action"]
    assert monitor["action"][0]["relatedAction"] == [written[1]]


def test_a_start_condition_in_cql_is_refused_naming_it(server: LiveServer) -> None:
    body = _discharge()
    _plan(body)["action"][0]["action"][1]["condition"] = [
        {"kind": "start", "expression": {"language": "text/cql", "expression": "Ready"}}
    ]
    answer = post(server, URL, body)
    assert answer.status_code == 422
    [issue] = answer.json()["issue"]
    assert issue["expression"] == ["PlanDefinition.action[0].action[1].condition[0].expression"]
    assert "CQL" in issue["diagnostics"]


def test_a_cql_condition_is_refused_naming_it(server: LiveServer) -> None:
    body = _discharge()
    _plan(body)["action"][0]["condition"] = [
        {"kind": "applicability", "expression": {"language": "text/cql", "expression": "X"}}
    ]
    answer = post(server, URL, body)
    assert answer.status_code == 422
    assert answer.json()["issue"][0]["expression"] == [
        "PlanDefinition.action[0].condition[0].expression"
    ]


def test_the_same_plan_without_the_condition_still_applies(server: LiveServer) -> None:
    answer = post(server, URL, _discharge())
    assert answer.status_code == 200
    [monitor] = answer.json()["entry"][0]["resource"]["action"]
    assert [a["title"] for a in monitor["action"]] == [
        "Case management or referral",
        "Schedule follow-up visit",
    ]


def test_a_definition_the_service_does_not_hold_is_named(server: LiveServer) -> None:
    body = _discharge()
    _plan(body)["action"][0]["definitionCanonical"] = "http://example.org/PlanDefinition/Nope"
    answer = post(server, URL, body)
    assert answer.status_code == 422
    [issue] = answer.json()["issue"]
    assert issue["expression"] == ["PlanDefinition.action[0].definitionCanonical"]
    assert "http://example.org/PlanDefinition/Nope" in issue["diagnostics"]


def test_an_action_element_the_request_group_would_lose_is_refused(server: LiveServer) -> None:
    body = _discharge()
    _plan(body)["action"][0]["definitionUri"] = "http://example.org/elsewhere"
    answer = post(server, URL, body)
    assert answer.status_code == 422
    assert answer.json()["issue"][0]["expression"] == ["PlanDefinition.action[0].definitionUri"]


def test_a_held_plan_applies_by_id_and_by_url_as_sent_inline(server: LiveServer) -> None:
    inline = copy.deepcopy(case(FIXTURES / "send-message.json")["request"])
    expected = structure(post(server, URL, inline).json())
    held = [p for p in inline["parameter"] if p["name"] != "planDefinition"]

    by_id = post(
        server,
        "/fhir/PlanDefinition/SendMessagePlan/$apply",
        {"resourceType": "Parameters", "parameter": held},
    )
    assert by_id.status_code == 200, by_id.text
    assert structure(by_id.json()) == expected

    url = {"name": "url", "valueUri": "http://example.org/PlanDefinition/SendMessagePlan"}
    by_url = post(server, URL, {"resourceType": "Parameters", "parameter": [*held, url]})
    assert by_url.status_code == 200, by_url.text
    assert structure(by_url.json()) == expected

    both = post(server, "/fhir/PlanDefinition/SendMessagePlan/$apply", inline)
    assert both.status_code == 400
    assert both.json()["issue"][0]["expression"] == ["planDefinition"]


def test_a_served_cds_service_is_still_applied_as_a_hook_call(server: LiveServer) -> None:
    answer = post(
        server,
        "/fhir/PlanDefinition/opioidcds-12-patient-view/$apply",
        {
            "resourceType": "Parameters",
            "parameter": [
                {"name": "subject", "valueString": "Patient/apply-nobody"},
                {
                    "name": "data",
                    "resource": {
                        "resourceType": "Bundle",
                        "type": "collection",
                        "entry": [
                            {
                                "resource": {
                                    "resourceType": "Patient",
                                    "id": "apply-nobody",
                                    "birthDate": "1970-01-01",
                                }
                            }
                        ],
                    },
                },
            ],
        },
    )
    assert answer.status_code == 200, answer.text
    group = answer.json()["entry"][0]["resource"]
    assert group["instantiatesCanonical"][0].endswith(
        "/fhir/PlanDefinition/opioidcds-12-patient-view"
    )
    assert any("decision" in e["url"] for e in group["extension"])


def test_what_an_action_points_at_is_readable_where_the_reference_says(server: LiveServer) -> None:
    answer = post(server, URL, case(FIXTURES / "registration.json")["request"])
    [action] = answer.json()["entry"][0]["resource"]["action"]
    reference = action["resource"]["reference"]
    assert reference == "Questionnaire/RegistrationQuestionnaire"
    read = httpx.get(f"{server.base}/fhir/{reference}", timeout=30)
    assert read.status_code == 200
    assert read.json()["url"] == "http://example.org/Questionnaire/RegistrationQuestionnaire"
    missing = httpx.get(f"{server.base}/fhir/Questionnaire/Nope", timeout=30)
    assert missing.status_code == 404
    assert missing.json()["resourceType"] == "OperationOutcome"


def test_held_plans_are_listed_beside_the_served_ones_and_read_by_id(server: LiveServer) -> None:
    listed = httpx.get(f"{server.base}/fhir/PlanDefinition", timeout=30).json()
    ids = {e["resource"]["id"] for e in listed["entry"]}
    assert {"CKDEducationPlan", "CKDFollowUpPlan", "SendMessagePlan"} <= ids
    assert "opioidcds-12-patient-view" in ids
    plan = httpx.get(f"{server.base}/fhir/PlanDefinition/CKDFollowUpPlan", timeout=30).json()
    assert plan["url"] == "http://example.org/PlanDefinition/CKDFollowUpPlan"
    activity = httpx.get(f"{server.base}/fhir/ActivityDefinition/SendMessageActivity", timeout=30)
    assert activity.json()["kind"] == "CommunicationRequest"


def test_a_condition_that_does_not_verify_is_named_by_its_place_in_the_plan(
    server: LiveServer,
) -> None:
    answer = post(server, URL, _with_condition("%subject.nickname.exists()"))
    assert answer.status_code == 422
    assert answer.json()["issue"][0]["expression"] == [
        "PlanDefinition.action[0].action[1].condition[0]"
    ]


def test_subject_inside_a_string_is_text_not_the_subject(server: LiveServer) -> None:
    expression = "%subject.name.where(text = 'see %subject.note').exists().not()"
    answer = post(server, URL, _with_condition(expression))
    assert _titles(answer) == ["Case management or referral", "Schedule follow-up visit"]


def test_goals_are_valid_r4_and_what_has_no_place_is_refused(server: LiveServer) -> None:
    body = _discharge()
    [goal] = _plan(body)["goal"]
    goal["start"] = {"text": "at discharge"}
    goal["target"] = [
        {
            "measure": {"text": "visits"},
            "detailQuantity": {"value": 1},
            "due": {"value": 7, "unit": "d", "system": "http://unitsofmeasure.org", "code": "d"},
        }
    ]
    answer = post(server, URL, body)
    assert answer.status_code == 200, answer.text
    [made] = [
        e["resource"] for e in answer.json()["entry"] if e["resource"]["resourceType"] == "Goal"
    ]
    assert made["startCodeableConcept"] == {"text": "at discharge"}
    assert made["target"][0]["dueDuration"]["value"] == 7
    assert made["lifecycleStatus"] == "proposed"

    goal["addresses"] = [{"text": "readmission"}]
    refused = post(server, URL, body)
    assert refused.status_code == 422
    assert refused.json()["issue"][0]["expression"] == ["PlanDefinition.goal[0].addresses"]


def test_an_action_participant_is_refused_not_carried_in_the_wrong_shape(
    server: LiveServer,
) -> None:
    body = _discharge()
    _plan(body)["action"][0]["participant"] = [{"type": "practitioner"}]
    answer = post(server, URL, body)
    assert answer.status_code == 422
    assert answer.json()["issue"][0]["expression"] == ["PlanDefinition.action[0].participant"]


def test_a_held_plan_applies_by_the_full_url_the_search_gives_it(server: LiveServer) -> None:
    listed = httpx.get(f"{server.base}/fhir/PlanDefinition", timeout=30).json()
    [full_url] = [e["fullUrl"] for e in listed["entry"] if e["resource"]["id"] == "SendMessagePlan"]
    inline = copy.deepcopy(case(FIXTURES / "send-message.json")["request"])
    held = [p for p in inline["parameter"] if p["name"] != "planDefinition"]
    answer = post(
        server,
        URL,
        {"resourceType": "Parameters", "parameter": [*held, {"name": "url", "valueUri": full_url}]},
    )
    assert answer.status_code == 200, answer.text
    assert structure(answer.json()) == structure(post(server, URL, inline).json())


def test_an_actions_dynamic_value_reads_the_action_as_percent_action(server: LiveServer) -> None:
    request = copy.deepcopy(case(FIXTURES / "discharge-instructions.json")["request"])
    plan = next(p["resource"] for p in request["parameter"] if p["name"] == "planDefinition")
    [value] = plan["action"][0]["dynamicValue"]
    value["expression"]["expression"] = "%action.title + ' for ' + %subject.name.given.first()"
    answer = post(server, URL, request)
    assert answer.status_code == 200, answer.text
    [message] = [
        e["resource"]
        for e in answer.json()["entry"]
        if e["resource"]["resourceType"] == "CommunicationRequest"
    ]
    assert message["payload"] == [
        {"contentString": "Send message with discharge instructions for Alice"}
    ]
