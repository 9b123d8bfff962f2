"""Request leniency: what real EHRs send outside CDS Hooks 2.0 is read when it can mean one
thing, with a data-quality note stored on the run, and refused naming the field when not."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.cds.errors import RequestInvalid
from app.cds.requests import parse_hook_request
from tests.cds import clinical as fx

OpenClient = Callable[..., AbstractContextManager[TestClient]]
CONTRAINDICATED = "5640"  # ibuprofen with an eGFR of 25: the med-safety service warns


@pytest.fixture
def client(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client() as c:
        yield c


def order_sign(*, patient_id: str | None = None, subject: str | None = None) -> dict[str, Any]:
    """A med-safety order-sign call for a new patient (the draft order contraindicated)."""
    pid = "p-" + fx.new_id()
    order = fx.draft_order(pid, CONTRAINDICATED)
    if subject is not None:
        order["subject"] = {"reference": subject.format(pid=pid, order=order["id"])}
    labs = [fx.observation(pid, "33914-3", 25, "mL/min/{1.73_m2}", category="laboratory")]
    return fx.hook_request(
        "order-sign",
        {
            "patientId": (patient_id or "{pid}").format(pid=pid),
            "draftOrders": {"resourceType": "Bundle", "entry": [{"resource": order}]},
        },
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid, "1970-01-01"),
            "allergies": None,
            "labs": fx.searchset(labs),
        },
    )


def stored_run(client: TestClient, response: Any) -> dict[str, Any]:
    run_id = response.json()["extension"]["dev.horismos.run"]["runId"]
    record: dict[str, Any] = client.get(f"/runs/{run_id}").json()
    return record


def indicators(response: Any) -> list[str]:
    return [card["indicator"] for card in response.json()["cards"]]


# --- typed ids in the context ------------------------------------------------------------------


def test_typed_context_ids_are_read_as_bare_ids_with_a_note() -> None:
    body = fx.hook_request(
        "patient-view",
        {"patientId": "Patient/p1", "encounterId": "Encounter/e1"},
        fhir_server=None,
    )
    req = parse_hook_request(body)
    assert (req.context["patientId"], req.context["encounterId"]) == ("p1", "e1")
    assert [(n.rule, n.field, n.received, n.read_as) for n in req.notes] == [
        ("typed-context-id", "context.patientId", "Patient/p1", "p1"),
        ("typed-context-id", "context.encounterId", "Encounter/e1", "e1"),
    ]


@pytest.mark.parametrize(
    ("field", "value"),
    [("patientId", "Encounter/p1"), ("encounterId", "Patient/e1"), ("patientId", "Patient/")],
)
def test_an_id_of_another_type_is_refused_naming_the_field(field: str, value: str) -> None:
    context = {"patientId": "p1", field: value}
    with pytest.raises(RequestInvalid) as info:
        parse_hook_request(fx.hook_request("patient-view", context, fhir_server=None))
    assert [i.expression for i in info.value.issues] == [f"context.{field}"]


def test_a_typed_patient_id_reaches_the_same_decision_and_the_run_records_the_note(
    client: TestClient,
) -> None:
    plain = order_sign()
    typed = order_sign(patient_id="Patient/{pid}")

    answer_plain = client.post("/cds-services/horismos-med-safety", json=plain)
    answer_typed = client.post("/cds-services/horismos-med-safety", json=typed)

    assert answer_plain.status_code == answer_typed.status_code == 200, answer_typed.text
    assert indicators(answer_typed) == indicators(answer_plain) == ["critical"]
    record = stored_run(client, answer_typed)
    [note] = record["dataQuality"]
    assert note["rule"] == "typed-context-id" and note["field"] == "context.patientId"
    assert note["received"] == typed["context"]["patientId"]
    assert stored_run(client, answer_plain)["dataQuality"] == []
    run_id = answer_typed.json()["extension"]["dev.horismos.run"]["runId"]
    page = client.get(f"/runs/{run_id}", headers={"accept": "text/html"})
    assert "Data quality" in page.text and typed["context"]["patientId"] in page.text


# --- the older hook shape ---------------------------------------------------------------------


def test_an_order_select_call_is_answered_by_an_order_sign_service(client: TestClient) -> None:
    body = order_sign()
    order = body["context"]["draftOrders"]["entry"][0]["resource"]
    body["hook"] = "order-select"
    body["context"]["selections"] = [f"MedicationRequest/{order['id']}"]

    answer = client.post("/cds-services/horismos-med-safety", json=body)

    assert answer.status_code == 200, answer.text
    assert indicators(answer) == ["critical"]
    [note] = stored_run(client, answer)["dataQuality"]
    assert (note["rule"], note["received"], note["readAs"]) == (
        "older-hook",
        "order-select",
        "order-sign",
    )


def test_an_unrelated_hook_is_still_refused_naming_the_hook(client: TestClient) -> None:
    body = order_sign()
    body["hook"] = "patient-view"
    body["context"].pop("draftOrders")
    answer = client.post("/cds-services/horismos-med-safety", json=body)
    assert answer.status_code == 400
    assert answer.json()["issue"][0]["expression"] == ["hook"]


# --- bare subject references ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("subject", "rule"),
    [("{pid}", "bare-subject"), ("{order}", "draft-subject")],
    ids=["the-patient-id", "the-order-own-id"],
)
def test_a_draft_order_with_a_bare_subject_is_read_as_the_patients(
    client: TestClient, subject: str, rule: str
) -> None:
    answer = client.post("/cds-services/horismos-med-safety", json=order_sign(subject=subject))

    assert answer.status_code == 200, answer.text
    assert indicators(answer) == ["critical"]  # the order was read: its contraindication shows
    record = stored_run(client, answer)
    assert [n["rule"] for n in record["dataQuality"]] == [rule]
    assert record["inputViolations"] == []


def test_a_stored_record_with_a_bare_subject_naming_someone_else_is_not_read(
    client: TestClient,
) -> None:
    body = order_sign()
    lab = body["prefetch"]["labs"]["entry"][0]["resource"]
    lab["subject"] = {"reference": "someone-else"}

    answer = client.post("/cds-services/horismos-med-safety", json=body)

    assert answer.status_code == 200, answer.text
    record = stored_run(client, answer)
    assert record["dataQuality"] == []
    assert [v["code"] for v in record["inputViolations"]] == ["subject"]


def test_a_stored_record_with_the_bare_patient_id_is_read_with_a_note(client: TestClient) -> None:
    body = order_sign()
    lab = body["prefetch"]["labs"]["entry"][0]["resource"]
    lab["subject"] = {"reference": body["context"]["patientId"]}

    answer = client.post("/cds-services/horismos-med-safety", json=body)

    assert indicators(answer) == ["critical"]  # the eGFR of 25 was read
    [note] = stored_run(client, answer)["dataQuality"]
    assert note["rule"] == "bare-subject" and note["field"].startswith("Observation/")


# --- resources sharing an id -------------------------------------------------------------------


def test_two_different_resources_under_one_id_in_the_prefetch_are_refused(
    client: TestClient,
) -> None:
    body = order_sign()
    labs = body["prefetch"]["labs"]["entry"]
    other = copy.deepcopy(labs[0])
    other["resource"]["valueQuantity"]["value"] = 95
    labs.append(other)

    answer = client.post("/cds-services/horismos-med-safety", json=body)

    assert answer.status_code == 400
    [issue] = answer.json()["issue"]
    assert issue["expression"] == ["prefetch.labs.entry[1].resource.id"]
    assert "prefetch.labs.entry[0].resource" in issue["diagnostics"]


def test_the_same_resource_twice_is_read_once(client: TestClient) -> None:
    body = order_sign()
    body["prefetch"]["labs"]["entry"].append(copy.deepcopy(body["prefetch"]["labs"]["entry"][0]))
    answer = client.post("/cds-services/horismos-med-safety", json=body)
    assert answer.status_code == 200, answer.text
    assert indicators(answer) == ["critical"]


# --- draft orders that cannot be read -----------------------------------------------------------


def test_a_draft_category_sent_as_one_object_is_read_as_a_list(client: TestClient) -> None:
    body = order_sign()
    order = body["context"]["draftOrders"]["entry"][0]["resource"]
    order["category"] = {"coding": [{"code": "community"}]}

    answer = client.post("/cds-services/horismos-med-safety", json=body)

    assert answer.status_code == 200, answer.text
    assert indicators(answer) == ["critical"]
    [note] = stored_run(client, answer)["dataQuality"]
    assert (note["rule"], note["field"]) == (
        "single-as-list",
        "context.draftOrders.entry[0].resource.category",
    )


@pytest.mark.parametrize(
    ("drop", "named"),
    [("intent", "intent"), ("medicationCodeableConcept", "no drug is chosen yet")],
)
def test_an_unreadable_draft_order_is_not_checked_and_the_others_are(
    client: TestClient, drop: str, named: str
) -> None:
    body = order_sign()
    entries = body["context"]["draftOrders"]["entry"]
    unreadable = copy.deepcopy(entries[0]["resource"])
    unreadable["id"] = "second-" + fx.new_id()
    del unreadable[drop]
    entries.append({"resource": unreadable})

    answer = client.post("/cds-services/horismos-med-safety", json=body)

    assert answer.status_code == 200, answer.text
    assert indicators(answer) == ["warning", "critical"]  # the readable order is still checked
    not_checked = answer.json()["cards"][0]
    assert "not checked" in not_checked["summary"]
    assert f"MedicationRequest/{unreadable['id']}" in not_checked["detail"]
    assert named in not_checked["detail"]
    assert not_checked["overrideReasons"] == answer.json()["cards"][1]["overrideReasons"]
    [note] = stored_run(client, answer)["dataQuality"]
    assert note["rule"] == "unread-draft-order"
    assert note["field"].startswith("context.draftOrders.entry[1].resource")


def test_a_request_without_hook_instance_is_still_refused(client: TestClient) -> None:
    body = order_sign()
    del body["hookInstance"]
    answer = client.post("/cds-services/horismos-med-safety", json=body)
    assert answer.status_code == 400
    assert answer.json()["issue"][0]["expression"] == ["hookInstance"]
