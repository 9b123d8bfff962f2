"""The Node FHIR test server behaves like the EHR servers the commit adapter talks to."""

from __future__ import annotations

import httpx
import pytest

from tests.support.fhir_server import FhirServer

pytestmark = pytest.mark.fhirserver


def _encounter(fhir_server: FhirServer) -> dict[str, object]:
    return {
        "resourceType": "Encounter",
        "id": fhir_server.new_id(),
        "status": "in-progress",
        "class": {"system": "http://terminology.hl7.org/CodeSystem/v3-ActCode", "code": "EMER"},
        "subject": {"reference": "Patient/p1"},
    }


def test_update_with_current_version_creates_exactly_one_new_version(
    fhir_server: FhirServer,
) -> None:
    stored = fhir_server.create(_encounter(fhir_server))
    first = stored["meta"]["versionId"]

    changed = {**stored, "priority": {"coding": [{"code": "UR"}]}}
    response = fhir_server.update(changed, if_match=first)

    assert response.status_code == 200
    assert response.headers["etag"] == f'W/"{response.json()["meta"]["versionId"]}"'
    history = fhir_server.history("Encounter", stored["id"])
    assert history[0]["meta"]["versionId"] == first
    assert len(history) == 2
    assert history[-1]["priority"]["coding"][0]["code"] == "UR"


def test_stale_if_match_is_refused_with_412_and_changes_nothing(fhir_server: FhirServer) -> None:
    stored = fhir_server.create(_encounter(fhir_server))
    stale = stored["meta"]["versionId"]
    assert fhir_server.update({**stored, "status": "finished"}, if_match=stale).status_code == 200

    response = fhir_server.update({**stored, "status": "cancelled"}, if_match=stale)

    assert response.status_code == 412
    assert fhir_server.read("Encounter", stored["id"])["status"] == "finished"
    assert len(fhir_server.history("Encounter", stored["id"])) == 2


def test_request_log_records_every_request_with_its_if_match(fhir_server: FhirServer) -> None:
    stored = fhir_server.create(_encounter(fhir_server))
    mark = fhir_server.mark()

    fhir_server.update(stored, if_match=stored["meta"]["versionId"])
    fhir_server.read("Encounter", stored["id"])

    logged = fhir_server.requests(since=mark)
    assert [(r["method"], r["url"], r["status"]) for r in logged] == [
        ("PUT", f"/fhir/Encounter/{stored['id']}", 200),
        ("GET", f"/fhir/Encounter/{stored['id']}", 200),
    ]
    assert logged[0]["ifMatch"] == f'W/"{stored["meta"]["versionId"]}"'


def test_search_by_bare_patient_id_finds_the_patients_observations(
    fhir_server: FhirServer,
) -> None:
    patient = fhir_server.create({"resourceType": "Patient", "id": fhir_server.new_id()})
    fhir_server.create(
        {
            "resourceType": "Observation",
            "status": "final",
            "category": [{"coding": [{"code": "vital-signs"}]}],
            "code": {"coding": [{"system": "http://loinc.org", "code": "8867-4"}]},
            "subject": {"reference": f"Patient/{patient['id']}"},
            "valueQuantity": {"value": 130, "unit": "/min"},
        }
    )

    bundle = httpx.get(
        f"{fhir_server.base_url}/Observation",
        params={"patient": patient["id"], "category": "vital-signs"},
    ).json()

    assert [e["resource"]["valueQuantity"]["value"] for e in bundle["entry"]] == [130]


def _patch(fhir_server: FhirServer, rid: str, if_match: str) -> httpx.Response:
    return httpx.patch(
        f"{fhir_server.base_url}/Encounter/{rid}",
        json=[{"op": "add", "path": "/priority", "value": {"coding": [{"code": "UR"}]}}],
        headers={"content-type": "application/json-patch+json", "if-match": f'W/"{if_match}"'},
    )


def test_a_json_patch_with_a_stale_if_match_is_refused_with_412(fhir_server: FhirServer) -> None:
    stored = fhir_server.create(_encounter(fhir_server))
    stale = stored["meta"]["versionId"]
    assert _patch(fhir_server, stored["id"], stale).status_code == 200

    response = _patch(fhir_server, stored["id"], stale)

    assert response.status_code == 412
    assert len(fhir_server.history("Encounter", stored["id"])) == 2


def test_a_create_with_if_none_exist_happens_once(fhir_server: FhirServer) -> None:
    token = f"urn:ietf:rfc:3986|urn:uuid:{fhir_server.new_id()}"
    system, value = token.split("|")
    body = {"resourceType": "Communication", "status": "completed"}
    body["identifier"] = [{"system": system, "value": value}]  # type: ignore[assignment]
    mark = fhir_server.mark()

    answers = [
        httpx.post(
            f"{fhir_server.base_url}/Communication",
            json=body,
            headers={"if-none-exist": f"identifier={token}"},
        )
        for _ in range(2)
    ]

    assert [a.status_code for a in answers] == [201, 200]
    assert answers[0].json()["id"] == answers[1].json()["id"]
    logged = fhir_server.requests(since=mark)
    assert [r["ifNoneExist"] for r in logged] == [f"identifier={token}"] * 2


def _observation(fhir_server: FhirServer, patient: str, code: str) -> dict[str, object]:
    return fhir_server.create(
        {
            "resourceType": "Observation",
            "id": fhir_server.new_id(),
            "status": "final",
            "code": {"coding": [{"system": "http://loinc.org", "code": code}]},
            "subject": {"reference": f"Patient/{patient}"},
        }
    )


def test_post_search_with_a_form_body_answers_as_the_get_search(fhir_server: FhirServer) -> None:
    """What the CDS Hooks Sandbox sends: ``POST [type]/_search``, parameters in the body."""
    patient = fhir_server.new_id()
    wanted = _observation(fhir_server, patient, "8867-4")
    _observation(fhir_server, patient, "9279-1")
    _observation(fhir_server, fhir_server.new_id(), "8867-4")  # another patient's
    with httpx.Client(base_url=fhir_server.base_url + "/") as client:
        posted = client.post(
            "Observation/_search?code=8867-4",
            content=f"patient={patient}",
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
        got = client.get("Observation", params={"patient": patient, "code": "8867-4"})
    assert posted.status_code == 200, posted.text
    assert [e["resource"]["id"] for e in posted.json()["entry"]] == [wanted["id"]]
    assert posted.json()["entry"] == got.json()["entry"]


def test_a_browser_may_call_it_from_another_origin(fhir_server: FhirServer) -> None:
    with httpx.Client(base_url=fhir_server.base_url + "/") as client:
        preflight = client.options(
            "Patient/_search",
            headers={
                "origin": "http://localhost:8080",
                "access-control-request-method": "POST",
                "access-control-request-headers": "authorization, content-type",
            },
        )
        answer = client.get("metadata", headers={"origin": "http://localhost:8080"})
    assert preflight.status_code == 204
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert "authorization" in preflight.headers["access-control-allow-headers"]
    assert answer.headers["access-control-allow-origin"] == "*"
