"""A served plan's actions the clinician may not leave out (``requiredBehavior`` ``must``) are the
response's ``systemActions``, not suggestions the clinician may decline: the request its
ActivityDefinition defines, built for the patient when the card is, sent when its card shows
(and, a child with conditions, when the rules decide they hold); one that cannot be built, or
whose conditions are unknown, is not sent and every card says so. The same plan's ``$apply``
carries them as RequestGroup actions no one may leave out."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from fhir.resources.R4B.servicerequest import ServiceRequest

from app.plandefinition.apply import ServedApply
from tests.plandefinition.conftest import patient_view as _call
from tests.plandefinition.test_plan_suggestions import (
    OpenClient,
    _activity,
    _female,
    _named_priority,
    _order,
    _plan,
)

MUST = "must"


def _must(action: dict[str, Any]) -> dict[str, Any]:
    return {**action, "requiredBehavior": MUST}


def _definitions(folder: Path) -> None:
    resources = [
        _activity("hba1c", "4548-4"),
        _activity("lipids", "57698-3"),
        _named_priority("needs-a-name"),
        _plan(
            "standing-orders",
            [
                {
                    **_must(_order("Diabetes follow-up: HbA1c", "hba1c")),
                    "action": [
                        _order("Lipid panel", "lipids"),
                        _must({**_female("Glucose"), **_order("Glucose", "needs-a-name")}),
                    ],
                },
                {
                    **_female("Women's screening"),
                    "action": [_must(_order("Lipids, always", "lipids"))],
                },
            ],
        ),
        _plan(
            "adult-checks",
            [
                {
                    **_condition("Adults", "%subject.birthDate < @2008-01-01"),
                    "action": [
                        _must(
                            {**_condition("Active", "%subject.active"), **_order("HbA1c", "hba1c")}
                        )
                    ],
                },
                {"title": "Everyone"},
            ],
        ),
    ]
    # a required member of a group the clinician picks from: refused, naming the group
    for behavior, members in (
        ("at-most-one", [_must(_order("HbA1c", "hba1c")), _order("Lipids", "lipids")]),
        ("all-or-none", [_must(_order("HbA1c", "hba1c")), _order("Lipids", "lipids")]),
        (
            "all",
            [_must(_order("HbA1c", "hba1c")), _must({**_female("L"), **_order("L", "lipids")})],
        ),
    ):
        resources.append(
            _plan(
                f"required-in-{behavior}",
                [{"title": "Orders", "selectionBehavior": behavior, "action": members}],
            )
        )
    for resource in resources:
        (folder / f"{resource['id']}.json").write_text(json.dumps(resource))


def _condition(title: str, expression: str) -> dict[str, Any]:
    return {
        "title": title,
        "condition": [
            {
                "kind": "applicability",
                "expression": {"language": "text/fhirpath", "expression": expression},
            }
        ],
    }


@pytest.fixture
def client(make_app_client: OpenClient, tmp_path: Path) -> Iterator[TestClient]:
    _definitions(tmp_path)
    with make_app_client(definition_paths=[tmp_path]) as opened:
        yield opened


def _codes(actions: list[dict[str, Any]]) -> list[str]:
    return [str(ServiceRequest.model_validate(a["resource"]).code.coding[0].code) for a in actions]


def test_a_required_request_is_a_system_action_not_a_suggestion(client: TestClient) -> None:
    """Man, no name: the HbA1c the plan requires is sent; the lipid panel stays a suggestion;
    the women's card does not show, so its required lipids are not sent either."""
    patient = {"resourceType": "Patient", "id": "m1", "gender": "male"}
    body = _call(client, "standing-orders", patient)
    assert [a["type"] for a in body["systemActions"]] == ["create"]
    assert _codes(body["systemActions"]) == ["4548-4"]
    [action] = body["systemActions"]
    assert action["description"] == "Diabetes follow-up: HbA1c"
    assert action["resource"]["subject"] == {"reference": "Patient/m1"}
    [card] = body["cards"]
    assert [s["label"] for s in card["suggestions"]] == ["Lipid panel"]
    assert "Not sent" not in card.get("detail", "")


def test_a_required_child_goes_with_its_conditions_and_is_said_when_not_sent(
    client: TestClient,
) -> None:
    named = {"resourceType": "Patient", "id": "f1", "gender": "female", "name": [{"family": "Doe"}]}
    body = _call(client, "standing-orders", named)
    # a woman: the glucose child applies and is required, but its definition sets a priority
    # from her name, which no priority is: not sent, and each card says why; the women's card
    # sends its lipids
    assert _codes(body["systemActions"]) == ["4548-4", "57698-3"]
    for card in body["cards"]:
        assert "Not sent: Glucose (its request could not be built" in card["detail"]

    unknown = _call(client, "standing-orders", {"resourceType": "Patient", "id": "u1"})
    # whether the glucose child applies is not known: not sent, and said; the women's card
    # and its lipids wait for the same answer (the plan is not checked)
    assert _codes(unknown["systemActions"]) == ["4548-4"]
    assert all("Not sent, not checked: Glucose " in c["detail"] for c in unknown["cards"])


def test_apply_carries_what_no_one_may_leave_out(client: TestClient) -> None:
    """The plan applied by id is expanded as written: its required action keeps its
    requiredBehavior and points at the request it made."""
    patient = {"resourceType": "Patient", "id": "m2", "gender": "male"}
    answer = client.post(
        "/fhir/PlanDefinition/standing-orders/$apply",
        json={
            "resourceType": "Parameters",
            "parameter": [
                {"name": "subject", "valueString": "Patient/m2"},
                {
                    "name": "data",
                    "resource": {
                        "resourceType": "Bundle",
                        "type": "collection",
                        "entry": [{"resource": patient}],
                    },
                },
            ],
        },
    )
    assert answer.status_code == 200, answer.text
    bundle = answer.json()
    [required] = [
        a for a in bundle["entry"][0]["resource"]["action"] if a.get("requiredBehavior") == MUST
    ]
    assert required["title"] == "Diabetes follow-up: HbA1c"
    made = {f"{e['resource']['resourceType']}/{e['resource']['id']}": e for e in bundle["entry"]}
    assert _codes([made[required["resource"]["reference"]]]) == ["4548-4"]


def test_a_served_services_system_actions_are_request_group_actions_no_one_may_leave_out() -> None:
    """A Turtle service applied by $apply: each system action of its answer is a RequestGroup
    action with requiredBehavior must, the resource it creates in the Bundle, the one it
    deletes named."""
    served = ServedApply(
        service_id="s",
        request={},
        patient="p1",
        encounter=None,
        base="http://h",
        when=datetime(2026, 12, 1, tzinfo=UTC),
    )
    created = ServiceRequest.model_validate(
        {
            "resourceType": "ServiceRequest",
            "status": "draft",
            "intent": "proposal",
            "subject": {"reference": "Patient/p1"},
        }
    ).model_dump(mode="json", exclude_none=True)
    bundle = served.answer(
        {
            "cards": [],
            "systemActions": [
                {"type": "create", "description": "Order it", "resource": created},
                {"type": "delete", "description": "Retire it", "resourceId": "Flag/f1"},
            ],
        }
    )
    group = bundle["entry"][0]["resource"]
    assert [(a["requiredBehavior"], a["description"]) for a in group["action"]] == [
        (MUST, "Order it"),
        (MUST, "Retire it"),
    ]
    [made] = bundle["entry"][1:]
    assert group["action"][0]["resource"] == {
        "reference": f"ServiceRequest/{made['resource']['id']}"
    }
    assert group["action"][1]["resource"] == {"reference": "Flag/f1"}
    assert group["action"][1]["type"]["coding"][0]["code"] == "remove"


def test_a_required_child_of_an_action_that_does_not_apply_is_not_said_to_wait(
    client: TestClient,
) -> None:
    """A child kept back because its action is decided not to apply would never be sent:
    nothing is said of it, though its own condition is unknown."""
    child = {"resourceType": "Patient", "id": "k1", "birthDate": "2015-01-01"}
    body = _call(client, "adult-checks", child)
    assert "systemActions" not in body
    assert [c["summary"] for c in body["cards"]] == ["Everyone"]
    assert "Not sent" not in json.dumps(body)
    adult = {**child, "id": "k2", "birthDate": "1980-01-01", "active": True}
    assert _codes(_call(client, "adult-checks", adult)["systemActions"]) == ["4548-4"]


@pytest.mark.parametrize("behavior", ["at-most-one", "all-or-none", "all"])
def test_a_required_member_of_a_group_the_clinician_picks_from_is_refused(
    client: TestClient, behavior: str
) -> None:
    deployments = client.get("/deployments").json()["deployments"]
    [refused] = [d for d in deployments if d["id"] == f"plandefinition-required-in-{behavior}"]
    assert refused["status"] == "refused"
    assert f"selects its actions {behavior}, and an action of it is required" in json.dumps(
        refused["problems"]
    )
