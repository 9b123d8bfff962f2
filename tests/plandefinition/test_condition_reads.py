"""What an authored plan's applicability conditions read besides the subject and the
encounter, over real HTTP: the call's practitioner (``%practitioner``, from the data) and the
call's ``parameters`` (``%name``, each entry's value as a literal of its type). True keeps the
action, false drops it, a value the call does not give is unknown and named, never false; a
parameter of a type a condition cannot compare with, or a malformed value, is refused naming
``parameters``; and the value that decided is in the recorded run's proof."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.plandefinition.conftest import post
from tests.plandefinition.test_authored_apply import URL, _extensions, _titles, _with_condition
from tests.support.live_server import LiveServer

BOTH = ["Case management or referral", "Schedule follow-up visit"]
FIRST = ["Case management or referral"]
UNDECIDED = ["PlanDefinition.action[0].action[1]: Schedule follow-up visit"]


def _data(body: dict[str, Any]) -> list[dict[str, Any]]:
    bundle = next(p["resource"] for p in body["parameter"] if p["name"] == "data")
    entries: list[dict[str, Any]] = bundle["entry"]
    return entries


def _resource(body: dict[str, Any], kind: str) -> dict[str, Any]:
    found: dict[str, Any] = next(
        e["resource"] for e in _data(body) if e["resource"]["resourceType"] == kind
    )
    return found


def _given(expression: str, *entries: dict[str, Any]) -> dict[str, Any]:
    body = _with_condition(expression)
    if entries:
        body["parameter"].append(
            {
                "name": "parameters",
                "resource": {"resourceType": "Parameters", "parameter": list(entries)},
            }
        )
    return body


def test_a_condition_reads_the_practitioner_the_call_names(server: LiveServer) -> None:
    """%practitioner is the call's practitioner, from the data: a match keeps the action, a
    mismatch drops it; a practitioner the data does not hold, or no practitioner parameter,
    leaves the condition unknown and named."""
    body = _with_condition("%practitioner.active = true")
    _resource(body, "Practitioner")["active"] = True
    assert _titles(post(server, URL, body)) == BOTH
    _resource(body, "Practitioner")["active"] = False
    dropped = post(server, URL, body)
    assert _titles(dropped) == FIRST
    assert "undecided-action" not in _extensions(dropped)

    absent = _with_condition("%practitioner.active = true")
    entries = _data(absent)
    entries[:] = [e for e in entries if e["resource"]["resourceType"] != "Practitioner"]
    unknown = post(server, URL, absent)
    assert _titles(unknown) == FIRST
    assert _extensions(unknown)["undecided-action"] == UNDECIDED

    unnamed = _with_condition("%practitioner.active = true")
    _resource(unnamed, "Practitioner")["active"] = True
    unnamed["parameter"] = [p for p in unnamed["parameter"] if p["name"] != "practitioner"]
    assert _extensions(post(server, URL, unnamed))["undecided-action"] == UNDECIDED


@pytest.mark.parametrize(
    ("expression", "entry", "kept"),
    [
        ("%subject.name.given.first() = %firstName", {"valueString": "Alice"}, True),
        ("%subject.name.given.first() = %firstName", {"valueString": "Bob"}, False),
        ("%visits > 2", {"valueInteger": 3}, True),
        ("%visits > 2", {"valueInteger": 2}, False),
        ("%followUp", {"valueBoolean": True}, True),
        ("%followUp", {"valueBoolean": False}, False),
        ("%weight > 60.5", {"valueDecimal": 70.25}, True),
        ("%weight > 60.5", {"valueDecimal": 1e-7}, False),
        ("%subject.name.where(family = %family).exists()", {"valueString": "O'Brien"}, False),
    ],
)
def test_a_condition_reads_the_calls_parameters_as_values(
    server: LiveServer, expression: str, entry: dict[str, Any], kept: bool
) -> None:
    name = expression.split("%")[-1].split()[0].split(")")[0]
    answer = post(server, URL, _given(expression, {"name": name, **entry}))
    assert _titles(answer) == (BOTH if kept else FIRST)
    assert "undecided-action" not in _extensions(answer)


def test_a_date_parameter_decides_against_the_subjects_record(server: LiveServer) -> None:
    """``%subject.birthDate < %cutoff``: the patient born in 1950 is before a 2000 cutoff and
    after a 1940 one; the value that decided is in the recorded run's proof."""
    for cutoff, kept in (("2000-01-01", True), ("1940-01-01", False)):
        body = _given("%subject.birthDate < %cutoff", {"name": "cutoff", "valueDate": cutoff})
        _resource(body, "Patient")["birthDate"] = "1950-05-05"
        answer = post(server, URL, body)
        assert _titles(answer) == (BOTH if kept else FIRST)
        [decision] = _extensions(answer)["decision"]
        assert f"%cutoff = @{cutoff}" in json.dumps(json.loads(decision)["proof"])


def test_a_parameter_the_call_does_not_give_is_unknown_never_false(server: LiveServer) -> None:
    for expression in ("%followUp", "%followUp = false", "%subject.active and %followUp"):
        body = _given(expression, {"name": "other", "valueBoolean": False})
        _resource(body, "Patient")["active"] = True
        answer = post(server, URL, body)
        assert _titles(answer) == FIRST
        assert _extensions(answer)["undecided-action"] == UNDECIDED
    # without it, an exists() is what FHIRPath says it is: false, and the action goes
    answer = post(server, URL, _given("%followUp.exists()"))
    assert _titles(answer) == FIRST
    assert "undecided-action" not in _extensions(answer)


@pytest.mark.parametrize(
    ("entry", "status", "words"),
    [
        ({"valueCoding": {"code": "x"}}, 422, "of type Coding"),
        ({"resource": {"resourceType": "Patient"}}, 422, "a resource"),
        ({"valueDate": "2000-13-45"}, 400, "not a Date"),
        ({"valueInteger": "three"}, 400, "not a Integer"),
        ({"valueQuantity": {"value": 1, "code": "kg"}}, 422, "of type Quantity"),
    ],
    ids=["coding", "resource", "bad-date", "bad-integer", "quantity"],
)
def test_a_parameter_a_condition_cannot_read_is_refused_naming_it(
    server: LiveServer, entry: dict[str, Any], status: int, words: str
) -> None:
    answer = post(server, URL, _given("%value.exists()", {"name": "value", **entry}))
    assert answer.status_code == status, answer.text
    [issue] = answer.json()["issue"]
    assert words in issue["diagnostics"]
    assert issue["expression"] == ["parameters"]


def test_a_value_of_another_type_than_compared_is_refused_input_not_an_error(
    server: LiveServer,
) -> None:
    """A date compared with the integer the call gives cannot be evaluated: the condition's
    input is refused and named, the action undecided; nothing fails."""
    body = _given("%subject.birthDate < %cutoff", {"name": "cutoff", "valueInteger": 5})
    _resource(body, "Patient")["birthDate"] = "1950-05-05"
    answer = post(server, URL, body)
    assert _titles(answer) == FIRST
    assert _extensions(answer)["undecided-action"] == UNDECIDED
    [decision] = _extensions(answer)["decision"]
    assert [i["state"] for i in json.loads(decision)["undecided"]["inputs"]] == ["refused"]


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ({"valueString": "C:\\new"}, "backslash"),
        ({"valueDate": "2020-02-30"}, "not a Date"),
        ({"valueDateTime": "2020-02-01T10:00:60Z"}, "not a DateTime"),
        ({"valuePositiveInt": 0}, "not a PositiveInt"),
    ],
    ids=["backslash", "no-such-day", "leap-second", "not-positive"],
)
def test_a_value_the_engine_would_misread_is_the_callers_mistake(
    server: LiveServer, entry: dict[str, Any], words: str
) -> None:
    """A value the FHIRPath engine would read otherwise than written (a backslash escape) or
    not at all (a day the calendar lacks) is a 400 naming parameters, not the record's fault."""
    answer = post(server, URL, _given("%value.exists()", {"name": "value", **entry}))
    assert answer.status_code == 400, answer.text
    [issue] = answer.json()["issue"]
    assert words in issue["diagnostics"]
    assert issue["expression"] == ["parameters"]


def test_a_parameter_is_read_as_fhirpath_names_it(server: LiveServer) -> None:
    """``%visits-1`` is %visits minus one, as FHIRPath reads it; a name FHIRPath cannot write
    bare is quoted."""
    visits = {"name": "visits", "valueInteger": 3}
    assert _titles(post(server, URL, _given("%visits-1 > 1", visits))) == BOTH
    assert _titles(post(server, URL, _given("%visits-1 > 2", visits))) == FIRST
    quoted = {"name": "follow-up", "valueBoolean": True}
    assert _titles(post(server, URL, _given("%`follow-up`", quoted))) == BOTH


def test_a_parameter_no_condition_reads_is_not_checked(server: LiveServer) -> None:
    """A Coding the plan's dynamic values might read is no business of the conditions."""
    body = _given(
        "%subject.name.given.first() = 'Alice'", {"name": "reason", "valueCoding": {"code": "x"}}
    )
    assert _titles(post(server, URL, body)) == BOTH


def test_what_is_not_a_parameter_is_still_refused(server: LiveServer) -> None:
    for expression, words in (
        ("%organization.active", "%organization"),
        ("%context.status = 'active'", "%context"),
        ("%`vs-condition`.exists()", "%vs-condition"),
        ("%patient.active", "%patient"),
        ("%visits` > 1", "quoted identifier"),
        ("%subject.active and %practitioner.active", "reads both the subject and the practitioner"),
    ):
        answer = post(server, URL, _with_condition(expression))
        assert answer.status_code == 422, answer.text
        assert words in answer.json()["issue"][0]["diagnostics"]


def test_a_written_plan_reading_a_parameter_is_stored_and_applied_with_it(
    server: LiveServer,
) -> None:
    """Written over FHIR, a plan whose condition reads a parameter verifies (no call gives one
    yet); applied by id, each call's value decides."""
    body = _given("%subject.birthDate < %cutoff")
    plan = next(p["resource"] for p in body["parameter"] if p["name"] == "planDefinition")
    plan.update(id="follow-up-by-cutoff", url="http://example.org/PlanDefinition/by-cutoff")
    written = httpx.put(
        f"{server.base}/fhir/PlanDefinition/follow-up-by-cutoff",
        content=json.dumps(plan),
        headers={"Content-Type": "application/fhir+json"},
        timeout=30,
    )
    assert written.status_code in (200, 201), written.text
    held = [p for p in body["parameter"] if p["name"] != "planDefinition"]
    _resource(body, "Patient")["birthDate"] = "1950-05-05"
    for cutoff, kept in (("2000-01-01", True), ("1940-01-01", False)):
        given = {"name": "cutoff", "valueDate": cutoff}
        call = [
            *held,
            {
                "name": "parameters",
                "resource": {"resourceType": "Parameters", "parameter": [given]},
            },
        ]
        answer = post(
            server,
            "/fhir/PlanDefinition/follow-up-by-cutoff/$apply",
            {"resourceType": "Parameters", "parameter": call},
        )
        assert _titles(answer) == (BOTH if kept else FIRST)
