"""PlanDefinitions with a named-event trigger in the definition files serve as CDS services,
compiled into the same model as the Turtle ones: in discovery, one card per action (summary
the title, indicator from the priority), an action with an applicability condition shown only
when the rules decide it holds, a run that cannot decide it answered with a not-checked card,
the decision stored with its proof; the collection's DischargeInstructions plan given a
patient-view trigger answers with its card; a plan that cannot be served is a refused
deployment, the others still serve."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.plandefinition.conftest import CPG
from tests.plandefinition.conftest import patient_view as _call

OpenClient = Callable[..., AbstractContextManager[TestClient]]


KDIGO = "https://kdigo.org/guidelines/ckd-evaluation-and-management/"


def _trigger(plan: dict[str, Any], hook: str = "patient-view") -> dict[str, Any]:
    plan["action"][0]["trigger"] = [{"type": "named-event", "name": hook}]
    return plan


def _definitions(folder: Path) -> None:
    education = json.loads((CPG / "definitions/CKDEducationPlan.json").read_text())
    plan = _trigger(copy.deepcopy(education))
    plan.update(id="ckd-education", url="http://example.org/PlanDefinition/ckd-education")
    plan["action"][0]["priority"] = "urgent"
    plan["action"][0]["documentation"] = [
        {"type": "documentation", "display": "KDIGO patient education", "url": KDIGO},
        {"type": "citation", "url": "https://example.org/a-citation"},  # not documentation
        {"type": "documentation", "url": "Library/not-a-web-page"},
        {"type": "documentation", "url": "https://[::1"},  # not a page: left out, not fatal
        {"type": "documentation", "url": "https:///no-host", "display": " "},
        {"type": "documentation", "url": "https://example.org/untitled"},
    ]
    plan["relatedArtifact"] = [
        {"type": "documentation", "url": "https://example.org/guides/ckd-education"}
    ]
    plan["action"].append(
        {
            "title": "Refer to a nephrologist",
            "priority": "routine",
            "condition": [
                {
                    "kind": "applicability",
                    "expression": {
                        "language": "text/fhirpath",
                        "expression": "%subject.birthDate < @1960-01-01",
                    },
                }
            ],
        }
    )
    (folder / "ckd-education.json").write_text(json.dumps(plan))
    request = json.loads((CPG / "plandefinition/discharge-instructions.json").read_text())
    discharge = next(
        p["resource"] for p in request["request"]["parameter"] if p["name"] == "planDefinition"
    )
    (folder / "discharge.json").write_text(json.dumps(_trigger(copy.deepcopy(discharge))))
    cql = _trigger(copy.deepcopy(education))
    cql.update(id="needs-cql", url="http://example.org/PlanDefinition/needs-cql")
    cql["library"] = ["http://example.org/Library/Logic"]
    (folder / "needs-cql.json").write_text(json.dumps(cql))
    later = _trigger(copy.deepcopy(education))
    later.update(id="starts-later", url="http://example.org/PlanDefinition/starts-later")
    # a child of an all-or-none group, in CQL: refused for what it is, not for either of those
    later["action"][0]["selectionBehavior"] = "all"
    later["action"][0]["action"] = [
        {
            "title": "Start when discharged",
            "condition": [
                {"kind": "start", "expression": {"language": "text/cql", "expression": "Done"}}
            ],
        }
    ]
    (folder / "starts-later.json").write_text(json.dumps(later))
    inpatient = _trigger(copy.deepcopy(education))
    inpatient.update(id="inpatient-only", url="http://example.org/PlanDefinition/inpatient-only")
    inpatient["action"][0]["condition"] = [
        {
            "kind": "applicability",
            "expression": {
                "language": "text/fhirpath",
                "expression": "%encounter.class.code = 'IMP'",
            },
        }
    ]
    inpatient["action"][0]["input"] = [{"type": "Encounter"}]  # every encounter of the patient
    (folder / "inpatient-only.json").write_text(json.dumps(inpatient))
    for ident, expression in (
        ("prescriber-led", "%practitioner.active = true"),  # the hook's user: served
        ("given-cutoff", "%subject.birthDate < %cutoff"),  # an $apply parameter: refused
    ):
        conditioned = _trigger(copy.deepcopy(education))
        conditioned.update(id=ident, url=f"http://example.org/PlanDefinition/{ident}")
        conditioned["action"][0]["condition"] = [
            {
                "kind": "applicability",
                "expression": {"language": "text/fhirpath", "expression": expression},
            }
        ]
        (folder / f"{ident}.json").write_text(json.dumps(conditioned))
    clash = _trigger(copy.deepcopy(education))
    clash.update(id="horismos-triage", url="http://example.org/PlanDefinition/clash")
    (folder / "clash.json").write_text(json.dumps(clash))
    nested = copy.deepcopy(education)
    nested.update(id="nested-trigger", url="http://example.org/PlanDefinition/nested-trigger")
    nested["title"] = "A plan " + "with a long title " * 10
    nested["action"][0]["title"] = "Education " + "x" * 200
    nested["action"][0]["action"] = [
        {
            "title": "Child with an undecidable condition",
            "trigger": [{"type": "named-event", "name": "patient-view"}],
            "condition": [
                {
                    "kind": "applicability",
                    "expression": {"language": "text/fhirpath", "expression": "%subject.active"},
                }
            ],
        }
    ]
    (folder / "nested.json").write_text(json.dumps(nested))
    two = _trigger(copy.deepcopy(education), "order-sign")
    two.update(id="two-hooks", url="http://example.org/PlanDefinition/two-hooks")
    two["action"].append(
        {"title": "b", "trigger": [{"type": "named-event", "name": "patient-view"}]}
    )
    (folder / "two.json").write_text(json.dumps(two))
    (folder / "SendMessageActivity.json").write_text(
        (CPG / "definitions/SendMessageActivity.json").read_text()
    )


@pytest.fixture
def client(make_app_client: OpenClient, tmp_path: Path) -> Iterator[TestClient]:
    _definitions(tmp_path)
    with make_app_client(definition_paths=[tmp_path]) as opened:
        yield opened


def _cards(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["indicator"], c["summary"]) for c in body["cards"]]


def test_a_triggered_plan_is_a_service_whose_cards_follow_its_conditions(
    client: TestClient,
) -> None:
    listed = {s["id"]: s for s in client.get("/cds-services").json()["services"]}
    assert listed["ckd-education"]["hook"] == "patient-view"

    older = _call(
        client, "ckd-education", {"resourceType": "Patient", "id": "a", "birthDate": "1950-01-01"}
    )
    assert _cards(older) == [
        ("warning", "CKD Patient Education"),
        ("info", "Refer to a nephrologist"),
    ]
    younger = _call(
        client, "ckd-education", {"resourceType": "Patient", "id": "b", "birthDate": "1990-01-01"}
    )
    assert _cards(younger) == [("warning", "CKD Patient Education")]
    unknown = _call(client, "ckd-education", {"resourceType": "Patient", "id": "c"})
    assert _cards(unknown) == [
        ("warning", "CKD Patient Education"),
        ("warning", "PlanDefinition CKDEducationPlan: not checked"),
    ]
    run = older["extension"]["dev.horismos.run"]
    assert run["decision"] == {"property": "plan", "value": "Applied"}
    stored = client.get(f"/runs/{run['runId']}").json()
    assert stored["status"] == "completed"

    authored = client.get("/fhir/PlanDefinition/ckd-education").json()
    assert authored["url"] == "http://example.org/PlanDefinition/ckd-education"


def test_the_collections_discharge_plan_answers_with_its_card(client: TestClient) -> None:
    practitioner = {"resourceType": "Practitioner", "id": "p1"}
    patient = {"resourceType": "Patient", "id": "d"}
    body = _call(client, "DischargeInstructionsPlan", patient, practitioner=practitioner)
    assert _cards(body) == [("info", "Send message with discharge instructions")]


def test_a_served_plans_condition_reads_the_user_and_no_apply_parameter(
    client: TestClient,
) -> None:
    """%practitioner in a served plan's condition is the hook's user, prefetched: an active
    prescriber sees the card, an inactive one does not, and a record that does not say leaves
    the condition unknown (a not-checked card), never false. A condition reading an $apply
    parameter cannot be served: a hook call gives none."""
    listed = {s["id"]: s for s in client.get("/cds-services").json()["services"]}
    assert listed["prescriber-led"]["prefetch"]["practitioner"] == (
        "Practitioner/{{userPractitionerId}}"
    )
    patient = {"resourceType": "Patient", "id": "e"}
    active = {"resourceType": "Practitioner", "id": "p1", "active": True}
    shown = _call(client, "prescriber-led", patient, practitioner=active)
    assert _cards(shown) == [("info", "CKD Patient Education")]
    inactive = _call(client, "prescriber-led", patient, practitioner={**active, "active": False})
    assert _cards(inactive) == []
    unsaid = {"resourceType": "Practitioner", "id": "p1"}
    unknown = _call(client, "prescriber-led", patient, practitioner=unsaid)
    assert _cards(unknown) == [("warning", "PlanDefinition CKDEducationPlan: not checked")]

    assert "given-cutoff" not in listed
    deployments = client.get("/deployments").json()["deployments"]
    [cutoff] = [d for d in deployments if d["id"] == "plandefinition-given-cutoff"]
    assert cutoff["status"] == "refused"
    assert "%cutoff, a parameter of $apply" in json.dumps(cutoff["problems"])


def test_a_plan_that_cannot_be_served_is_refused_and_named(client: TestClient) -> None:
    listed = {s["id"] for s in client.get("/cds-services").json()["services"]}
    assert "needs-cql" not in listed
    assert "ckd-education" in listed
    deployments = client.get("/deployments").json()["deployments"]
    [refused] = [d for d in deployments if d["id"] == "plandefinition-needs-cql"]
    assert refused["status"] == "refused"
    assert "CQL" in json.dumps(refused["problems"])
    # a card shows its action now: when it starts or stops has no place on it
    assert "starts-later" not in listed
    [later] = [d for d in deployments if d["id"] == "plandefinition-starts-later"]
    assert later["status"] == "refused"
    assert "action[0].action[0].condition[0] is a start condition" in json.dumps(later["problems"])
    # a condition on the call's encounter beside a search of all the patient's encounters could
    # read another one: refused, not guessed
    [inpatient] = [d for d in deployments if d["id"] == "plandefinition-inpatient-only"]
    assert inpatient["status"] == "refused"
    assert "could read another encounter" in json.dumps(inpatient["problems"])


def test_a_plan_never_displaces_a_turtle_service(client: TestClient) -> None:
    listed = [s["id"] for s in client.get("/cds-services").json()["services"]]
    assert listed.count("horismos-triage") == 1
    deployments = {d["id"]: d for d in client.get("/deployments").json()["deployments"]}
    assert deployments["triage"]["status"] == "serving"
    clash = deployments["plandefinition-horismos-triage"]
    assert clash["status"] == "refused"
    assert "horismos-triage" in json.dumps(clash["problems"])
    two = deployments["plandefinition-two-hooks"]
    assert two["status"] == "refused"
    assert "several hooks" in json.dumps(two["problems"])


def test_a_nested_trigger_serves_and_an_undecided_child_shows_no_warning(
    client: TestClient,
) -> None:
    body = _call(client, "nested-trigger", {"resourceType": "Patient", "id": "e"})
    [(indicator, summary)] = _cards(body)
    assert indicator == "info"
    assert summary.startswith("Education xxx")
    assert len(summary) <= 139


def test_a_served_plans_cards_offer_override_reasons_and_link_its_documentation(
    client: TestClient,
) -> None:
    body = _call(
        client, "ckd-education", {"resourceType": "Patient", "id": "f", "birthDate": "1990-01-01"}
    )
    [card] = body["cards"]
    assert card["source"]["url"] == "https://example.org/guides/ckd-education"
    # the action's documentation pages follow the decision record's link, in order
    record, *pages = card["links"]
    assert record["label"].startswith("Decision record")
    assert pages == [
        {"label": "KDIGO patient education", "url": KDIGO, "type": "absolute"},
        {
            "label": "https://example.org/untitled",
            "url": "https://example.org/untitled",
            "type": "absolute",
        },
    ]
    reasons = [r["code"] for r in card["overrideReasons"]]
    assert reasons == [
        "cds-not-applicable",
        "cds-suboptimal-context",
        "recipient-disagrees-evidence",
    ]
