"""``dataEndpoint`` on ``$apply``: the call's own resources its ``data`` Bundle does not hold
are read from the FHIR server it names (a real one, over HTTP), with the endpoint's bearer
token, held to the rules of a hook call's ``fhirServer``; what ``data`` holds stands; a
failure is said, never guessed around."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.plandefinition.conftest import CPG, case
from tests.support.fhir_server import FhirServer
from tests.support.rogue_http import Answer, rogue_server

pytestmark = pytest.mark.fhirserver

OpenClient = Callable[..., AbstractContextManager[TestClient]]
FHIR = {"Content-Type": "application/fhir+json"}
ACTIVITY = "/fhir/ActivityDefinition/$apply"
GREETING = "Greeting: Hello! {name} Message: Example Activity Definition for a recommendation"


@pytest.fixture
def client(make_app_client: OpenClient, fhir_server: FhirServer) -> Iterator[TestClient]:
    with make_app_client(allowed_fhir_servers=[fhir_server.base_url]) as opened:
        yield opened


def _endpoint(address: str, *headers: str) -> dict[str, Any]:
    endpoint: dict[str, Any] = {
        "resourceType": "Endpoint",
        "status": "active",
        "connectionType": {
            "system": "http://terminology.hl7.org/CodeSystem/endpoint-connection-type",
            "code": "hl7-fhir-rest",
        },
        "payloadType": [{"text": "patient data"}],
        "address": address,
    }
    if headers:
        endpoint["header"] = list(headers)
    return endpoint


def _stored(fhir: FhirServer, name: str) -> tuple[str, str]:
    """A patient called ``name`` and the practitioner Michael, on the FHIR server."""
    patient, practitioner = fhir.new_id(), fhir.new_id()
    fhir.update({"resourceType": "Patient", "id": patient, "name": [{"given": [name]}]})
    fhir.update(
        {"resourceType": "Practitioner", "id": practitioner, "name": [{"given": ["Michael"]}]}
    )
    return f"Patient/{patient}", f"Practitioner/{practitioner}"


def _send_message(
    subject: str, practitioner: str, endpoint: dict[str, Any] | None, *, keep: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The collection's send-message call for ``subject``, its data holding the Encounter (and
    the resources of ``keep``), the rest to be read from ``endpoint``."""
    body = copy.deepcopy(case(CPG / "activitydefinition/send-message.json")["request"])
    params = [p for p in body["parameter"] if p["name"] not in ("contentEndpoint",)]
    params = [p for p in params if p["name"] != "terminologyEndpoint"]
    for p in params:
        if p["name"] == "subject":
            p["valueString"] = subject
        elif p["name"] == "practitioner":
            p["valueString"] = practitioner
        elif p["name"] == "data":
            p["resource"]["entry"] = [
                e
                for e in p["resource"]["entry"]
                if e["resource"]["resourceType"] == "Encounter"
                or f"{e['resource']['resourceType']}/{e['resource']['id']}" in keep
            ]
    if endpoint is not None:
        params.append({"name": "dataEndpoint", "resource": endpoint})
    body["parameter"] = params
    return body


def _post(client: TestClient, body: dict[str, Any], path: str = ACTIVITY) -> Any:
    return client.post(path, json=body, headers=FHIR)


def _payload(answer: Any) -> str:
    assert answer.status_code == 200, answer.text
    return str(answer.json()["payload"][0]["contentString"])


def test_the_subject_and_practitioner_are_read_from_the_endpoint_with_its_token(
    client: TestClient, fhir_server: FhirServer
) -> None:
    subject, practitioner = _stored(fhir_server, "Beatrice")
    mark = fhir_server.mark()
    endpoint = _endpoint(fhir_server.base_url, "Authorization: Bearer endpoint-token")
    made = _post(client, _send_message(subject, practitioner, endpoint))
    assert _payload(made).startswith(GREETING.format(name="Beatrice"))
    assert made.json()["subject"] == {"reference": subject}
    reads = [r for r in fhir_server.requests(mark) if r["method"] == "GET"]
    assert sorted(r["url"].split("/fhir/", 1)[1] for r in reads) == sorted([subject, practitioner])
    assert {r["authorization"] for r in reads} == {"present"}  # (the log keeps no token)


def test_without_the_endpoint_the_same_call_is_refused_naming_what_it_lacks(
    client: TestClient, fhir_server: FhirServer
) -> None:
    subject, practitioner = _stored(fhir_server, "Beatrice")
    answer = _post(client, _send_message(subject, practitioner, None))
    assert answer.status_code == 422
    assert subject in answer.json()["issue"][0]["diagnostics"]


def test_what_the_data_holds_stands_over_the_endpoint(
    client: TestClient, fhir_server: FhirServer
) -> None:
    subject, practitioner = _stored(fhir_server, "Beatrice")
    body = _send_message(subject, practitioner, _endpoint(fhir_server.base_url))
    data = next(p["resource"] for p in body["parameter"] if p["name"] == "data")
    data["entry"].append(
        {
            "resource": {
                "resourceType": "Patient",
                "id": subject.removeprefix("Patient/"),
                "name": [{"given": ["Bea"]}],
            }
        }
    )
    mark = fhir_server.mark()
    assert _payload(_post(client, body)).startswith(GREETING.format(name="Bea"))
    assert [r["url"].split("/fhir/", 1)[1] for r in fhir_server.requests(mark)] == [practitioner]


def test_a_resource_the_endpoint_does_not_have_is_missing_not_guessed(
    client: TestClient, fhir_server: FhirServer
) -> None:
    subject, _practitioner = _stored(fhir_server, "Beatrice")
    absent = f"Practitioner/{fhir_server.new_id()}"
    answer = _post(client, _send_message(subject, absent, _endpoint(fhir_server.base_url)))
    assert answer.status_code == 422
    [issue] = answer.json()["issue"]
    assert issue["expression"] == ["ActivityDefinition.dynamicValue[0].expression"]
    assert absent in issue["diagnostics"]


def test_an_authored_plans_condition_is_decided_on_the_subject_read_there(
    client: TestClient, fhir_server: FhirServer
) -> None:
    older, younger = fhir_server.new_id(), fhir_server.new_id()
    for pid, born in ((older, "1950-03-01"), (younger, "1990-03-01")):
        fhir_server.update({"resourceType": "Patient", "id": pid, "birthDate": born})
    plan = {
        "resourceType": "PlanDefinition",
        "status": "draft",
        "action": [
            {
                "title": "Screen for falls",
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
        ],
    }

    def titles(pid: str) -> list[str]:
        body = {
            "resourceType": "Parameters",
            "parameter": [
                {"name": "planDefinition", "resource": plan},
                {"name": "subject", "valueString": f"Patient/{pid}"},
                {"name": "dataEndpoint", "resource": _endpoint(fhir_server.base_url)},
            ],
        }
        answer = _post(client, body, "/fhir/PlanDefinition/$apply")
        assert answer.status_code == 200, answer.text
        group = answer.json()["entry"][0]["resource"]
        return [a["title"] for a in group.get("action", [])]

    assert titles(older) == ["Screen for falls"]
    assert titles(younger) == []


@pytest.mark.parametrize(
    ("endpoint", "status", "expression"),
    [
        ({"resourceType": "Endpoint"}, 400, "dataEndpoint.address"),
        ({"resourceType": "Patient"}, 400, "dataEndpoint"),
        ("https://ehr.example/fhir", 400, "dataEndpoint"),
        ({"resourceType": "Endpoint", "address": "https://elsewhere.example/fhir"}, 403,
         "dataEndpoint.address"),
        ({"resourceType": "Endpoint", "address": "ftp://x"}, 400, "dataEndpoint.address"),
        ({"resourceType": "Endpoint", "address": "{fhir}", "connectionType": {"code": "dicom"}},
         422, "dataEndpoint.connectionType"),
        ({"resourceType": "Endpoint", "address": "{fhir}", "header": ["X-Tenant: a"]}, 422,
         "dataEndpoint.header[0]"),
        ({"resourceType": "Endpoint", "address": "{fhir}", "header": ["Authorization: Bearer tök"]},
         422, "dataEndpoint.header[0]"),
    ],
    ids=["no-address", "not-an-endpoint", "a-string", "not-allowed", "not-http", "not-rest",
         "another-header", "a-token-no-header-carries"],
)  # fmt: skip
def test_an_endpoint_it_cannot_read_is_refused_naming_it(
    client: TestClient,
    fhir_server: FhirServer,
    endpoint: Any,
    status: int,
    expression: str,
) -> None:
    if isinstance(endpoint, dict) and endpoint.get("address") == "{fhir}":
        endpoint = {**endpoint, "address": fhir_server.base_url}
    subject, practitioner = _stored(fhir_server, "Beatrice")
    body = _send_message(subject, practitioner, None)
    key = "resource" if isinstance(endpoint, dict) else "valueString"
    body["parameter"].append({"name": "dataEndpoint", key: endpoint})
    mark = fhir_server.mark()
    answer = _post(client, body)
    assert answer.status_code == status, answer.text
    assert answer.json()["issue"][0]["expression"] == [expression]
    assert fhir_server.requests(mark) == []  # nothing was read


def test_an_endpoint_that_does_not_answer_is_a_412_to_retry(
    make_app_client: OpenClient, fhir_server: FhirServer
) -> None:
    subject, practitioner = _stored(fhir_server, "Beatrice")
    with make_app_client() as client:  # open mode: any server may be named
        closed = _endpoint("http://127.0.0.1:9/fhir")
        answer = _post(client, _send_message(subject, practitioner, closed))
    assert answer.status_code == 412, answer.text
    [issue] = answer.json()["issue"]
    assert (issue["code"], issue["expression"]) == ("transient", ["dataEndpoint"])


def test_nothing_is_read_for_a_call_that_applies_nothing(
    client: TestClient, fhir_server: FhirServer
) -> None:
    body = {
        "resourceType": "Parameters",
        "parameter": [
            {"name": "subject", "valueString": f"Patient/{fhir_server.new_id()}"},
            {"name": "dataEndpoint", "resource": _endpoint(fhir_server.base_url)},
        ],
    }
    mark = fhir_server.mark()
    unknown = _post(client, body, "/fhir/PlanDefinition/no-such-plan/$apply")
    assert unknown.status_code == 404
    assert fhir_server.requests(mark) == []


def _served_body(patient: str, **given: Any) -> dict[str, Any]:
    parameters = [{"name": "subject", "valueString": f"Patient/{patient}"}]
    parameters += [{"name": k, "resource": v} for k, v in given.items()]
    return {"resourceType": "Parameters", "parameter": parameters}


def test_a_served_service_reads_its_whole_chart_from_the_endpoint(
    client: TestClient, fhir_server: FhirServer
) -> None:
    """The same decision as with the chart sent in data, each prefetch search made at the
    endpoint by the hook's own reads, with its token; data and dataEndpoint together are
    refused (a search is read whole from one place)."""
    from uuid import uuid4

    from tests.plandefinition.test_export import _rec12_data

    patient, resources = _rec12_data()
    tag = uuid4().hex[:8]  # ids of this test's own on the shared FHIR server
    patient_id = f"{patient}-{tag}"
    text = json.dumps(resources).replace(patient, patient_id)
    resources = json.loads(text)
    for resource in resources:
        fhir_server.update(resource)
    url = "/fhir/PlanDefinition/opioidcds-12-patient-view/$apply"
    entries = [{"resource": r} for r in resources]
    data = {"resourceType": "Bundle", "type": "collection", "entry": entries}

    def decision(answer: Any) -> Any:
        assert answer.status_code == 200, answer.text
        group = answer.json()["entry"][0]["resource"]
        return json.loads(group["extension"][0]["valueString"]).get("decision")

    sent = decision(_post(client, _served_body(patient_id, data=data), url))
    assert sent is not None and sent["value"] == "OfferTreatment"
    mark = fhir_server.mark()
    endpoint = _endpoint(fhir_server.base_url, "Authorization: Bearer endpoint-token")
    read = decision(_post(client, _served_body(patient_id, dataEndpoint=endpoint), url))
    assert read == sent
    reads = fhir_server.requests(mark)
    assert reads and {r["authorization"] for r in reads} == {"present"}

    both = _post(client, _served_body(patient_id, data=data, dataEndpoint=endpoint), url)
    assert both.status_code == 422
    assert both.json()["issue"][0]["expression"] == ["data"]


@pytest.mark.parametrize(
    ("answer", "code", "said"),
    [
        (Answer.json({"resourceType": "OperationOutcome"}, status=403), "forbidden", "403"),
        (Answer(status=302, headers={"location": "https://elsewhere.example/fhir/Patient/x"}),
         "processing", "redirect"),
        (Answer.json({"resourceType": "Patient", "id": "someone-else"}), "processing",
         "something else"),
        (Answer(status=503), "transient", "try again"),
    ],
    ids=["forbidden", "redirect-not-followed", "another-resource", "unavailable"],
)  # fmt: skip
def test_an_endpoint_that_answers_wrongly_is_a_412_saying_how(
    make_app_client: OpenClient, fhir_server: FhirServer, answer: Answer, code: str, said: str
) -> None:
    subject, practitioner = _stored(fhir_server, "Beatrice")
    with rogue_server() as ehr, make_app_client() as client:
        ehr.on(f"/fhir/{subject}", answer)
        body = _send_message(subject, practitioner, _endpoint(ehr.base + "/fhir"))
        refused = _post(client, body)
        seen = list(ehr.seen)
    assert refused.status_code == 412, refused.text
    [issue] = refused.json()["issue"]
    assert (issue["code"], issue["expression"]) == (code, ["dataEndpoint"])
    assert said in issue["diagnostics"] and subject in issue["diagnostics"]
    assert len(seen) == 1  # read once; a redirect is not followed
