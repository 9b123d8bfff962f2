"""A served plan's cards carry what its actions propose: the action's own ActivityDefinition and
its child actions as suggestions (the request built for the patient at call time, as
``$apply`` builds it), the action's selectionBehavior mapped to what CDS Hooks allows, a child
with conditions offered only when the rules decide they hold (unknown: not offered, and the
card says so), what the definitions read and the actions' inputs as the service's prefetch;
what a card cannot carry makes the plan refused, naming the element."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from fhir.resources.R4B.communicationrequest import CommunicationRequest
from fhir.resources.R4B.servicerequest import ServiceRequest

from tests.plandefinition.conftest import CPG
from tests.plandefinition.conftest import patient_view as _call

OpenClient = Callable[..., AbstractContextManager[TestClient]]
TRIGGER = [{"type": "named-event", "name": "patient-view"}]
LOINC = "http://loinc.org"
PRACTITIONER = {"resourceType": "Practitioner", "id": "p1", "name": [{"given": ["Ada"]}]}
#: what the screening plan's input asks for: one HbA1c on record
OBSERVATIONS = {
    "resourceType": "Bundle",
    "type": "searchset",
    "entry": [
        {
            "resource": {
                "resourceType": "Observation",
                "id": "o1",
                "status": "final",
                "code": {"coding": [{"system": "http://loinc.org", "code": "4548-4"}]},
                "subject": {"reference": "Patient/s1"},
                "valueQuantity": {"value": 6.1, "unit": "%"},
            }
        }
    ],
}


def _activity(ident: str, code: str, **more: Any) -> dict[str, Any]:
    return {
        "resourceType": "ActivityDefinition",
        "id": ident,
        "url": f"http://example.org/ActivityDefinition/{ident}",
        "version": "1",
        "status": "active",
        "kind": "ServiceRequest",
        "intent": "proposal",
        "code": {"coding": [{"system": LOINC, "code": code}]},
        **more,
    }


def _plan(ident: str, actions: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    actions[0].setdefault("trigger", TRIGGER)
    return {
        "resourceType": "PlanDefinition",
        "id": ident,
        "url": f"http://example.org/PlanDefinition/{ident}",
        "version": "1",
        "status": "active",
        "title": ident,
        "action": actions,
        **more,
    }


def _order(title: str, ident: str) -> dict[str, Any]:
    return {"title": title, "definitionCanonical": f"http://example.org/ActivityDefinition/{ident}"}


def _female(title: str) -> dict[str, Any]:
    return {
        "title": title,
        "condition": [
            {
                "kind": "applicability",
                "expression": {
                    "language": "text/fhirpath",
                    "expression": "%subject.gender = 'female'",
                },
            }
        ],
    }


BEHAVIORS = ("any", "one-or-more", "at-most-one", "exactly-one", "all", "all-or-none")


def _named_priority(ident: str) -> dict[str, Any]:
    """A glucose test whose priority its dynamic value takes from the patient's name: of the
    wrong type for the element whenever the patient has a name, never a request to offer."""
    return _activity(
        ident,
        "2345-7",
        dynamicValue=[
            {
                "path": "priority",
                "expression": {
                    "language": "text/fhirpath",
                    "expression": "%subject.name.first()",
                },
            }
        ],
    )


def _definitions(folder: Path) -> None:
    resources: list[dict[str, Any]] = [
        _activity("hba1c", "4548-4"),
        _activity("lipids", "57698-3"),
        _named_priority("bad-priority"),
        json.loads((CPG / "definitions/SendMessageActivity.json").read_text()),
        _plan(
            "behaviors",
            [
                {
                    "title": f"Selection {behavior}",
                    "selectionBehavior": behavior,
                    "action": [_order("HbA1c", "hba1c"), _order("Lipid panel", "lipids")],
                }
                for behavior in BEHAVIORS
            ],
        ),
        _plan(
            "screening",
            [
                {
                    "title": "Screening",
                    "input": [
                        {
                            "type": "Observation",
                            "codeFilter": [
                                {"path": "code", "code": [{"system": LOINC, "code": "4548-4"}]}
                            ],
                        }
                    ],
                    "action": [
                        _female("Offer a mammogram"),
                        {"title": "Discuss diet", "textEquivalent": "Talk about diet"},
                        _order("Glucose", "bad-priority"),
                    ],
                }
            ],
        ),
    ]
    resources.append(
        _plan(
            "reads-its-action",
            [
                {
                    "title": "Counsel on the new inhaler",
                    "definitionCanonical": "http://example.org/ActivityDefinition/SendMessageActivity",
                    "dynamicValue": [
                        {
                            "path": "payload[0].contentString",
                            "expression": {
                                "language": "text/fhirpath",
                                "expression": "%action.title",
                            },
                        }
                    ],
                }
            ],
        )
    )
    request = json.loads((CPG / "plandefinition/discharge-instructions.json").read_text())
    discharge = next(
        p["resource"] for p in request["request"]["parameter"] if p["name"] == "planDefinition"
    )
    discharge = copy.deepcopy(discharge)
    discharge["action"][0]["trigger"] = TRIGGER
    resources.append(discharge)
    for resource in resources:
        (folder / f"{resource['id']}.json").write_text(json.dumps(resource))


@pytest.fixture
def client(make_app_client: OpenClient, tmp_path: Path) -> Iterator[TestClient]:
    _definitions(tmp_path)
    with make_app_client(definition_paths=[tmp_path]) as opened:
        yield opened


def test_the_discharge_plans_card_offers_the_message_its_definition_builds(
    client: TestClient,
) -> None:
    listed = {s["id"]: s for s in client.get("/cds-services").json()["services"]}
    assert listed["DischargeInstructionsPlan"]["prefetch"] == {
        "patient": "Patient/{{context.patientId}}",
        "practitioner": "Practitioner/{{userPractitionerId}}",
    }
    patient = {"resourceType": "Patient", "id": "d", "name": [{"given": ["Alice"]}]}
    body = _call(client, "DischargeInstructionsPlan", patient, practitioner=PRACTITIONER)
    [card] = body["cards"]
    [suggestion] = card["suggestions"]
    assert card["selectionBehavior"] == "any"
    assert suggestion["label"] == "Send message with discharge instructions"
    [action] = suggestion["actions"]
    assert action["type"] == "create"
    message = action["resource"]
    CommunicationRequest.model_validate(message)
    # the definition's own text, then the action's dynamic value over it, as $apply builds it
    assert message["payload"] == [
        {"contentString": "Provide patient discharge instructions for Alice"}
    ]
    assert message["subject"] == {"reference": "Patient/d"}
    assert message["requester"] == {"reference": "Practitioner/p1"}
    assert message["status"] == "draft"


@pytest.mark.parametrize(
    ("behavior", "shown", "suggested"),
    [
        ("any", "any", [1, 1]),
        ("one-or-more", "any", [1, 1]),
        ("at-most-one", "at-most-one", [1, 1]),
        ("exactly-one", "at-most-one", [1, 1]),
        ("all", "at-most-one", [2]),
        ("all-or-none", "at-most-one", [2]),
    ],
)
def test_every_selection_behavior_is_mapped_to_what_cds_hooks_allows(
    client: TestClient, behavior: str, shown: str, suggested: list[int]
) -> None:
    body = _call(client, "behaviors", {"resourceType": "Patient", "id": f"b-{behavior}"})
    card = next(c for c in body["cards"] if c["summary"] == f"Selection {behavior}")
    assert card["selectionBehavior"] == shown
    assert [len(s["actions"]) for s in card["suggestions"]] == suggested
    codes = [
        ServiceRequest.model_validate(a["resource"]).code.coding[0].code
        for s in card["suggestions"]
        for a in s["actions"]
    ]
    assert codes == ["4548-4", "57698-3"]


def test_a_conditioned_child_is_offered_only_when_the_rules_decide_it_holds(
    client: TestClient,
) -> None:
    def labels(patient: dict[str, Any]) -> tuple[list[str], str]:
        [card] = _call(client, "screening", patient, observation=OBSERVATIONS)["cards"]
        return [s["label"] for s in card.get("suggestions", ())], card["detail"]

    female, detail = labels({"resourceType": "Patient", "id": "s1", "gender": "female"})
    # (Glucose: its definition's dynamic value reads a name these patients lack)
    assert female == ["Offer a mammogram", "Discuss diet", "Glucose"]
    assert "Not offered, not checked" not in detail
    male, _ = labels({"resourceType": "Patient", "id": "s2", "gender": "male"})
    assert male == ["Discuss diet", "Glucose"]
    unknown, detail = labels({"resourceType": "Patient", "id": "s3"})
    assert unknown == ["Discuss diet", "Glucose"]
    assert "Not offered, not checked: Offer a mammogram" in detail


def test_a_request_that_cannot_be_built_is_not_offered_and_the_card_says_why(
    client: TestClient,
) -> None:
    patient = {"resourceType": "Patient", "id": "s4", "name": [{"family": "Doe"}]}
    body = _call(client, "screening", patient, observation=OBSERVATIONS)
    [card] = body["cards"]
    assert "Glucose" not in [s["label"] for s in card["suggestions"]]
    assert "Not offered: Glucose (its request could not be built" in card["detail"]
    assert "priority" in card["detail"]
    # a text-only child is acknowledged, changing no record
    [discuss] = [s for s in card["suggestions"] if s["label"] == "Discuss diet"]
    assert "actions" not in discuss


def test_an_actions_input_is_the_services_prefetch(client: TestClient) -> None:
    listed = {s["id"]: s for s in client.get("/cds-services").json()["services"]}
    assert listed["screening"]["prefetch"] == {
        "patient": "Patient/{{context.patientId}}",
        "observation": "Observation?patient={{context.patientId}}&code=http://loinc.org|4548-4",
    }


REFUSED = [
    (
        {"title": "Nested", "action": [{"title": "a", "action": [{"title": "b"}]}]},
        "PlanDefinition.action[0].action[0] has actions of its own",
    ),
    (
        {
            "title": "Questionnaire",
            "action": [
                {
                    "title": "Register",
                    "definitionCanonical": "http://example.org/Questionnaire/reg",
                }
            ],
        },
        "names a Questionnaire",
    ),
    (
        {"title": "All", "selectionBehavior": "all", "action": [_female("a"), {"title": "b"}]},
        "taken as a unit",
    ),
    ({"title": "Unlabelled", "action": [{"code": [{"text": "x"}]}]}, "no title"),
    (
        {
            "title": "All, one of them text",
            "selectionBehavior": "all",
            "action": [_order("HbA1c", "hba1c"), {"title": "Fast for 8 hours"}],
        },
        "its text would be lost",
    ),
]


@pytest.mark.parametrize(("action", "why"), REFUSED)
def test_what_a_card_cannot_carry_refuses_the_plan_naming_it(
    make_app_client: OpenClient, tmp_path: Path, action: dict[str, Any], why: str
) -> None:
    questionnaire = {
        "resourceType": "Questionnaire",
        "id": "reg",
        "url": "http://example.org/Questionnaire/reg",
        "status": "active",
    }
    (tmp_path / "reg.json").write_text(json.dumps(questionnaire))
    (tmp_path / "hba1c.json").write_text(json.dumps(_activity("hba1c", "4548-4")))
    (tmp_path / "plan.json").write_text(json.dumps(_plan("refused-plan", [action])))
    (tmp_path / "fine.json").write_text(json.dumps(_plan("fine-plan", [{"title": "Fine"}])))
    with make_app_client(definition_paths=[tmp_path]) as client:
        listed = {s["id"] for s in client.get("/cds-services").json()["services"]}
        deployments = {d["id"]: d for d in client.get("/deployments").json()["deployments"]}
    assert "refused-plan" not in listed and "fine-plan" in listed
    refused = deployments["plandefinition-refused-plan"]
    assert refused["status"] == "refused"
    assert why in json.dumps(refused["problems"])


def test_a_suggestions_dynamic_value_reads_its_action(client: TestClient) -> None:
    patient = {"resourceType": "Patient", "id": "a1", "name": [{"given": ["Alice"]}]}
    body = _call(client, "reads-its-action", patient, practitioner=PRACTITIONER)
    [card] = body["cards"]
    [suggestion] = card["suggestions"]
    [action] = suggestion["actions"]
    assert action["resource"]["payload"] == [{"contentString": "Counsel on the new inhaler"}]
