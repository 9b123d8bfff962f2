"""Prefetch templating and gathering, with the FHIR server faked at the httpx transport seam."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from adapters.fhir.client import FhirClient
from app.cds.errors import PrefetchUnavailable
from app.cds.prefetch import Gathered, Unrenderable, gather, render
from app.cds.requests import parse_hook_request
from app.ontology.model import PrefetchTemplate

CTX = {"userId": "PractitionerRole/r9", "patientId": "p1", "encounterId": "e1"}
TEMPLATES = (
    PrefetchTemplate(key="patient", query="Patient/{{context.patientId}}"),
    PrefetchTemplate(key="vitals", query="Observation?patient={{context.patientId}}"),
)
PATIENT = {"resourceType": "Patient", "id": "p1", "birthDate": "1950-01-01"}
EMPTY = {"resourceType": "Bundle", "type": "searchset", "entry": []}


def test_render_fills_context_and_user_tokens() -> None:
    assert render("Patient/{{context.patientId}}", CTX) == "Patient/p1"
    assert render("PractitionerRole?_id={{userPractitionerRoleId}}", CTX) == (
        "PractitionerRole?_id=r9"
    )
    with pytest.raises(Unrenderable):
        render("Practitioner/{{userPractitionerId}}", CTX)
    with pytest.raises(Unrenderable):
        render("Observation?subject={{context.missing}}", CTX)


def _request(prefetch: dict[str, Any] | None = None, server: bool = True) -> Any:
    body: dict[str, Any] = {
        "hook": "encounter-start",
        "hookInstance": "d1577c69-dfbe-44ad-ba6d-3e05e953b2ea",
        "context": CTX,
    }
    if server:
        body["fhirServer"] = "http://fhir.test/r4"
        body["fhirAuthorization"] = {
            "access_token": "tok",
            "token_type": "Bearer",
            "expires_in": 300,
            "scope": "user/*.read",
            "subject": "cds",
        }
    if prefetch is not None:
        body["prefetch"] = prefetch
    return parse_hook_request(body)


def _gather(request: Any, handler: Any, deadline: float = 5.0) -> Gathered:
    async def go() -> Gathered:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            return await gather(TEMPLATES, request, http, readers=FhirClient, deadline=deadline)

    return anyio.run(go)


def test_sent_keys_are_used_and_null_means_no_data() -> None:
    def never(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"unexpected read {request.url}")

    got = _gather(_request({"patient": PATIENT, "vitals": None}), never)
    assert got.data == {"patient": PATIENT, "vitals": None}
    assert got.fetched == ()


def test_missing_keys_are_read_with_the_bearer_token() -> None:
    seen: list[tuple[str, str | None]] = []

    def fhir(request: httpx.Request) -> httpx.Response:
        seen.append((str(request.url), request.headers.get("authorization")))
        body = PATIENT if request.url.path.endswith("/Patient/p1") else EMPTY
        return httpx.Response(200, json=body)

    got = _gather(_request({"patient": PATIENT}), fhir)
    assert got.data["vitals"] == {"resourceType": "Bundle", "type": "searchset", "entry": []}
    assert seen == [("http://fhir.test/r4/Observation?patient=p1", "Bearer tok")]
    assert got.fetched == ("vitals",)


def test_an_operation_outcome_in_a_key_is_refetched() -> None:
    outcome = {"resourceType": "OperationOutcome", "issue": [{"severity": "error", "code": "x"}]}

    def fhir(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=PATIENT if "Patient" in str(request.url) else EMPTY)

    got = _gather(_request({"patient": outcome, "vitals": EMPTY}), fhir)
    assert got.data["patient"] == PATIENT


def test_unobtainable_key_is_412_naming_the_key_and_reason() -> None:
    def fhir(request: httpx.Request) -> httpx.Response:
        if "Patient" in str(request.url):
            return httpx.Response(
                404,
                json={
                    "resourceType": "OperationOutcome",
                    "issue": [{"severity": "error", "code": "not-found", "diagnostics": "gone"}],
                },
            )
        return httpx.Response(200, json=EMPTY)

    with pytest.raises(PrefetchUnavailable) as info:
        _gather(_request(), fhir)
    issue = info.value.outcome()["issue"][0]
    assert info.value.status_code == 412
    assert issue["expression"] == ["prefetch.patient"]
    assert "404" in issue["diagnostics"] and "gone" in issue["diagnostics"]


def test_no_fhir_server_and_missing_key_is_412() -> None:
    with pytest.raises(PrefetchUnavailable) as info:
        _gather(_request({"patient": PATIENT}, server=False), lambda r: httpx.Response(500))
    assert info.value.outcome()["issue"][0]["expression"] == ["prefetch.vitals"]


def test_server_error_is_retryable_and_still_412() -> None:
    with pytest.raises(PrefetchUnavailable) as info:
        _gather(_request({"patient": PATIENT}), lambda r: httpx.Response(503, text="down"))
    assert info.value.outcome()["issue"][0]["code"] == "transient"


def test_the_whole_hook_shares_one_deadline() -> None:
    async def slow(request: httpx.Request) -> httpx.Response:
        await anyio.sleep(10)
        return httpx.Response(200, json=EMPTY)

    async def go() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(slow)) as http:
            await gather(TEMPLATES, _request(), http, readers=FhirClient, deadline=0.05)

    with pytest.raises(PrefetchUnavailable) as info:
        anyio.run(go)
    issues = info.value.outcome()["issue"]
    assert len(issues) == 2
    for issue in issues:  # said like any other missing answer: no port-scan oracle
        assert issue["code"] == "transient"
        assert "could not be reached or did not answer in time" in issue["diagnostics"]


def test_a_malformed_resource_fetched_or_sent_is_left_out_and_named_not_a_refused_call() -> None:
    """A resource that is not valid FHIR R4 is not read, whoever sent it: the key has no data
    and the resource is named with the element and the rule it breaks."""
    bad = {"resourceType": "Patient", "id": "p1", "birthDate": "not a date"}
    fetched = _gather(_request({"vitals": EMPTY}), lambda r: httpx.Response(200, json=bad))
    sent = _gather(_request({"patient": bad, "vitals": EMPTY}), lambda r: httpx.Response(500))
    for got in (fetched, sent):
        assert got.data["patient"] is None
        [unread] = got.invalid["patient"]
        assert unread.reference == "Patient/p1" and unread.resource_type == "Patient"
        assert unread.why.startswith("birth date: ") and "regex" in unread.why
