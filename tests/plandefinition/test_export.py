"""Every served CDS service readable as a FHIR R4 PlanDefinition (``GET /fhir/PlanDefinition``),
valid against the R4 models, with what an engine that lists guidelines needs: the hook as a
named-event trigger, the prefetch as inputs, one action per card with its priority from the
indicator and when it shows, the suggestions as child actions; a combined service as the
PlanDefinitions it combines."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from fhir.resources.R4B.bundle import Bundle
from fhir.resources.R4B.capabilitystatement import CapabilityStatement
from fhir.resources.R4B.plandefinition import PlanDefinition

OpenClient = Callable[..., AbstractContextManager[TestClient]]
BASE = "https://cds.example.test"


@pytest.fixture
def client(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client(public_base_url=BASE) as c:
        yield c


def test_every_service_of_discovery_is_a_valid_plan_definition(client: TestClient) -> None:
    answer = client.get("/fhir/PlanDefinition")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/fhir+json")
    bundle = answer.json()
    Bundle.model_validate(bundle)
    listed = {e["resource"]["id"]: e["resource"] for e in bundle["entry"]}
    each = {s["id"] for s in client.get("/individual/cds-services").json()["services"]}
    combined = {s["id"] for s in client.get("/cds-services").json()["services"]}
    assert set(listed) == each | combined
    for plan in listed.values():
        PlanDefinition.model_validate(plan)
        assert plan["url"] == f"{BASE}/fhir/PlanDefinition/{plan['id']}"


def test_a_service_reads_as_its_hook_prefetch_cards_and_suggestions(client: TestClient) -> None:
    plan: dict[str, Any] = client.get("/fhir/PlanDefinition/horismos-med-safety").json()

    assert plan["version"] == "1.7.0"
    [top] = plan["action"]
    assert top["trigger"] == [{"type": "named-event", "name": "order-sign"}]
    queries = [i["extension"][0]["valueString"] for i in top["input"]]
    assert "Observation?patient={{context.patientId}}&category=laboratory" in queries
    by_title = {a["title"]: a for a in top["action"]}
    contraindicated = by_title["Contraindicated medication order"]
    assert contraindicated["priority"] == "stat"
    [condition] = contraindicated["condition"]
    assert condition["kind"] == "applicability"
    assert "order safety is Contraindicated" in condition["expression"]["description"]
    assert [a["type"]["coding"][0]["code"] for a in contraindicated["action"]] == [
        "remove",
        "update",
    ]
    assert by_title["Medication order needs caution"]["priority"] == "urgent"


def test_a_card_template_is_static_text_with_the_template_as_a_dynamic_value(
    client: TestClient,
) -> None:
    plan = client.get("/fhir/PlanDefinition/opioidcds-08").json()
    [top] = plan["action"]
    naloxone = top["action"][0]
    assert naloxone["title"] == "Offer naloxone, mitigate overdose risk: …"
    [title] = [d for d in naloxone["dynamicValue"] if d["path"] == "title"]
    assert "{{instance.shortDrugName}}" in title["expression"]["expression"]
    assert "one card for each" in naloxone["condition"][0]["expression"]["description"]


def test_a_combined_service_is_the_plan_definitions_it_combines(client: TestClient) -> None:
    plan = client.get("/fhir/PlanDefinition/opioidcds-order-sign").json()
    [top] = plan["action"]
    members = [a["definitionCanonical"] for a in top["action"]]
    assert members[:2] == [
        f"{BASE}/fhir/PlanDefinition/horismos-med-safety",
        f"{BASE}/fhir/PlanDefinition/opioidcds-08",
    ]
    for url in members:  # each resolves
        assert client.get(url.removeprefix(BASE)).status_code == 200


def test_an_unknown_plan_definition_is_a_404_operation_outcome_and_metadata_lists_it(
    client: TestClient,
) -> None:
    missing = client.get("/fhir/PlanDefinition/nope")
    assert missing.status_code == 404
    assert missing.json()["resourceType"] == "OperationOutcome"
    statement = client.get("/fhir/metadata").json()
    CapabilityStatement.model_validate(statement)
    [rest] = statement["rest"]
    assert [r["type"] for r in rest["resource"]] == [
        "PlanDefinition",
        "ActivityDefinition",
        "Questionnaire",
        "Library",
    ]


# --- $apply -------------------------------------------------------------------------------


def _rec12_data() -> tuple[str, list[dict[str, Any]]]:
    from datetime import UTC, datetime

    from tests.support.opioid_examples import CASES_DIR, load_examples, prepare

    [example] = [e for e in load_examples(CASES_DIR) if e.name == "rec-12-untreated"]
    prepared = prepare(example, datetime.now(UTC).date(), tag="apply-")
    return prepared.patient_id, prepared.stored


def _parameters(**given: Any) -> dict[str, Any]:
    out = []
    for name, value in given.items():
        if isinstance(value, dict) and "resourceType" in value:
            out.append({"name": name, "resource": value})
        else:
            out.append({"name": name, "valueString": value})
    return {"resourceType": "Parameters", "parameter": out}


def test_apply_answers_a_bundle_with_the_request_group_first(client: TestClient) -> None:
    patient, resources = _rec12_data()
    data = {
        "resourceType": "Bundle",
        "type": "collection",
        "entry": [{"resource": r} for r in resources],
    }

    answer = client.post(
        "/fhir/PlanDefinition/opioidcds-12-patient-view/$apply",
        json=_parameters(subject=f"Patient/{patient}", data=data),
    )

    assert answer.status_code == 200, answer.text
    bundle = answer.json()
    Bundle.model_validate(bundle)
    group = bundle["entry"][0]["resource"]
    assert group["resourceType"] == "RequestGroup"
    assert group["instantiatesCanonical"] == [
        f"{BASE}/fhir/PlanDefinition/opioidcds-12-patient-view"
    ]
    assert group["subject"] == {"reference": f"Patient/{patient}"}
    [action] = group["action"]
    assert action["title"].startswith("Offer evidence-based medication for opioid use disorder")
    assert action["priority"] == "urgent"  # a warning card
    decision = json.loads(group["extension"][0]["valueString"])
    assert decision["decision"]["value"] == "OfferTreatment"


def test_apply_by_url_and_a_patient_with_no_finding_gets_an_empty_request_group(
    client: TestClient,
) -> None:
    patient = "apply-nobody"
    data = {
        "resourceType": "Bundle",
        "type": "collection",
        "entry": [
            {"resource": {"resourceType": "Patient", "id": patient, "birthDate": "1980-01-01"}}
        ],
    }
    answer = client.post(
        "/fhir/PlanDefinition/$apply",
        json=_parameters(
            url=f"{BASE}/fhir/PlanDefinition/opioidcds-12-patient-view",
            subject=f"Patient/{patient}",
            data=data,
        ),
    )
    assert answer.status_code == 200, answer.text
    [entry] = answer.json()["entry"]
    assert "action" not in entry["resource"]


@pytest.mark.parametrize(
    ("path", "params", "status", "words"),
    [
        ("opioidcds-08", {"subject": "Patient/p"}, 422, "order-sign"),
        ("opioidcds-12-patient-view", {}, 400, "subject"),
        ("opioidcds-12-patient-view", {"subject": "Observation/x"}, 400, "Patient reference"),
        ("nope", {"subject": "Patient/p"}, 404, "nope"),
        (
            "opioidcds-12-patient-view",
            {
                "subject": "Patient/p",
                "planDefinition": {"resourceType": "PlanDefinition", "status": "draft"},
            },
            400,
            "not allowed when the operation names",
        ),
    ],
    ids=["order-hook", "no-subject", "not-a-patient", "unknown", "inline"],
)
def test_apply_refuses_what_it_cannot_answer_with_an_operation_outcome(
    client: TestClient, path: str, params: dict[str, Any], status: int, words: str
) -> None:
    answer = client.post(f"/fhir/PlanDefinition/{path}/$apply", json=_parameters(**params))
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert body["resourceType"] == "OperationOutcome"
    assert words in body["issue"][0]["diagnostics"]


def test_apply_on_a_served_service_is_recorded_audited_and_replayed(client: TestClient) -> None:
    """The run an $apply call makes goes through the hook's own record path: stored with its
    proof and source versions, linked from the RequestGroup, replayed equal; no clinician saw
    its cards, so the card analytics leave it out."""
    patient, resources = _rec12_data()
    entries = [{"resource": r} for r in resources]
    data = {"resourceType": "Bundle", "type": "collection", "entry": entries}
    answer = client.post(
        "/fhir/PlanDefinition/opioidcds-12-patient-view/$apply",
        json=_parameters(subject=f"Patient/{patient}", data=data),
    )
    assert answer.status_code == 200, answer.text
    group = answer.json()["entry"][0]["resource"]
    decision = json.loads(group["extension"][0]["valueString"])
    run_id = decision["runId"]
    [action] = group["action"]
    record = f"{BASE}/runs/{run_id}"
    assert any(str(d["url"]).startswith(record) for d in action["documentation"])

    stored = client.get(f"/runs/{run_id}")
    assert stored.status_code == 200, stored.text
    run = stored.json()
    assert run["decision"] == decision["decision"]
    assert run["proof"]
    assert run["origin"] == "apply"  # not an EHR's hook call, and the record says so
    page = client.get(f"/runs/{run_id}", headers={"Accept": "text/html"})
    assert "Made by a <code>$apply</code> call" in page.text
    replayed = client.post(f"/runs/{run_id}/replay")
    assert replayed.status_code == 200, replayed.text
    assert replayed.json()["same"] is True

    report = client.get("/analytics", headers={"Accept": "application/json"}).json()
    assert run_id not in json.dumps(report)
    assert "opioidcds-12-patient-view" not in json.dumps(report.get("services", report))


def test_an_undecided_apply_run_says_all_its_record_says(client: TestClient) -> None:
    from tests.changes.test_shadow_analytics import _apply_body
    from tests.changes.triage_calls import triage_request

    request = triage_request(145)
    vitals = request["prefetch"]["vitals"]
    vitals["entry"] = vitals["entry"][:1]  # the heart rate alone: not enough to decide
    vitals["total"] = 1
    answer = client.post("/fhir/PlanDefinition/horismos-triage/$apply", json=_apply_body(request))
    assert answer.status_code == 200, answer.text
    decision = json.loads(answer.json()["entry"][0]["resource"]["extension"][0]["valueString"])
    assert "decision" not in decision
    run = client.get(f"/runs/{decision['runId']}").json()
    # the stored run's whole account, not the hook answer's summary of it
    assert decision["undecided"] == run["undecided"]
    assert set(decision["undecided"]) > {"property", "inputs"}
