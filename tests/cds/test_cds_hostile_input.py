"""A client's mistake is a 4xx naming what is wrong, never a 5xx: unknown resource types, JSON
nested a thousand deep, NUL characters, absurd JWT dates, huge ids, and a database that is down
(real database on both backends, real HTTP through the ASGI app, a real loopback FHIR server)."""

from __future__ import annotations

import base64
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from joserfc import jwt
from joserfc.jwk import ECKey
from sqlalchemy import text

from app.store import make_engine
from tests.cds import clinical as fx
from tests.support.rogue_http import Answer, rogue_server

OpenClient = Callable[..., AbstractContextManager[TestClient]]
TRIAGE = "/cds-services/horismos-triage"
BASE = "https://cds.example.test"
SPEC_JWT = json.loads(
    (
        Path(__file__).parents[1] / "data/cds/fixtures/jwt-es384-example-expired-spec.json"
    ).read_text()
)
ISS = SPEC_JWT["payload"]["iss"]
DEEP = "[" * 1000 + "]" * 1000


@pytest.fixture
def client(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client(public_base_url=BASE) as c:
        yield c


def triage_body(pid: str | None = None) -> dict[str, Any]:
    pid = pid or fx.new_id()
    eid = fx.new_id()
    return fx.hook_request(
        "encounter-start",
        {"patientId": pid, "encounterId": eid},
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid),
            "encounter": fx.encounter(eid, pid, reason="chest pain"),
            "vitals": fx.searchset([fx.observation(pid, "8867-4", 80, "/min")]),
            "conditions": fx.searchset([]),
        },
    )


def _runs(database_url: str) -> int:
    eng = make_engine(database_url)
    try:
        with eng.connect() as conn:
            return int(conn.execute(text("SELECT count(*) FROM runs")).scalar_one())
    finally:
        eng.dispose()


def _expressions(resp: Any) -> list[str]:
    return [e for issue in resp.json()["issue"] for e in issue.get("expression", [])]


# --- unknown resource types -------------------------------------------------------------------


def _inputs(client: TestClient, resp: Any) -> dict[str, dict[str, Any]]:
    """The stored run's input status by property local name."""
    assert resp.status_code == 200, resp.text
    run_id = resp.json()["extension"]["dev.horismos.run"]["runId"]
    stored = client.get(f"/runs/{run_id}").json()
    return {i["property"].rsplit("#", 1)[-1]: i for i in stored["inputs"]}


def test_an_unknown_resource_type_in_prefetch_is_an_unread_record_not_a_refused_call(
    client: TestClient,
) -> None:
    """A search result carrying a resource of no FHIR R4 type: the call is answered, and every
    reading that search feeds is unread — the record could have been any of them."""
    body = triage_body()
    del body["prefetch"]["encounter"]["reasonCode"]  # structured data only: Assess decides
    body["prefetch"]["vitals"]["entry"].append({"resource": {"resourceType": "Nonsense"}})
    resp = client.post(TRIAGE, json=body)
    run = resp.json()["extension"]["dev.horismos.run"]
    assert "decision" not in run and run["terminal"] == "EscalateIncomplete"
    heart = _inputs(client, resp)["heartRate"]
    assert heart["state"] == "unread"
    [reason] = [r for r in heart["reasons"] if r["state"] == "unread"]
    assert reason["source"] == "prefetch.vitals.entry[1].resource.resourceType"
    assert "unknown FHIR R4 resource type 'Nonsense'" in reason["detail"]
    top = triage_body()
    top["prefetch"]["patient"] = {"resourceType": "Nonsense", "id": "x"}
    age = _inputs(client, client.post(TRIAGE, json=top))["age"]
    assert age["state"] == "unread"
    assert any("'Nonsense'" in r["detail"] for r in age["reasons"])


def test_an_unknown_contained_resource_type_makes_its_container_unread(
    client: TestClient,
) -> None:
    body = triage_body()
    body["prefetch"]["patient"]["contained"] = [{"resourceType": "Nonsense", "id": "c"}]
    age = _inputs(client, client.post(TRIAGE, json=body))["age"]
    assert age["state"] == "unread"
    assert any("'Nonsense'" in r["detail"] for r in age["reasons"])


def test_an_unknown_resource_type_from_the_fhir_server_is_an_unread_record(
    client: TestClient,
) -> None:
    pid, eid = fx.new_id(), fx.new_id()
    with rogue_server() as fhir:
        fhir.on(f"/fhir/Patient/{pid}", Answer.json(fx.patient(pid)))
        fhir.on(f"/fhir/Encounter/{eid}", Answer.json(fx.encounter(eid, pid)))
        fhir.on("/fhir/Observation", Answer.json(fx.searchset([{"resourceType": "Nonsense"}])))
        fhir.on("/fhir/Condition", Answer.json(fx.searchset([])))
        body = fx.hook_request(
            "encounter-start",
            {"patientId": pid, "encounterId": eid},
            fhir_server=fhir.base + "/fhir",
        )
        resp = client.post(TRIAGE, json=body)
    assert _inputs(client, resp)["heartRate"]["state"] == "unread"


# --- JSON nested a thousand deep ----------------------------------------------------------------


@pytest.mark.parametrize("depth", [150, 1000, 100_000])
def test_a_body_nested_too_deep_is_400(client: TestClient, database_url: str, depth: int) -> None:
    deep = "[" * depth + "]" * depth
    raw = json.dumps(triage_body())[:-1] + f', "extension": {{"x": {deep}}}}}'
    resp = client.post(TRIAGE, content=raw, headers={"content-type": "application/json"})
    assert resp.status_code == 400, resp.text
    assert "nested more than" in resp.text
    if depth < 1000:  # deeper still, the decoder itself gives up: no path to name
        assert _expressions(resp)[0].startswith("extension.x[0][0]")
    assert _runs(database_url) == 0


def test_feedback_nested_a_thousand_deep_is_400(client: TestClient) -> None:
    raw = (
        '{"feedback": [{"card": "c", "outcome": "overridden", '
        '"outcomeTimestamp": "2025-01-01T00:00:00Z", "overrideReason": {"x": ' + DEEP + "}}]}"
    )
    resp = client.post(
        TRIAGE + "/feedback", content=raw, headers={"content-type": "application/json"}
    )
    assert resp.status_code == 400, resp.text
    assert "nested more than" in resp.text


def test_a_fhir_answer_nested_a_thousand_deep_is_412(client: TestClient) -> None:
    pid, eid = fx.new_id(), fx.new_id()
    deep_patient = json.dumps(fx.patient(pid))[:-1] + f', "extension": {DEEP}}}'
    with rogue_server() as fhir:
        fhir.on(f"/fhir/Patient/{pid}", Answer.json(deep_patient))
        body = triage_body(pid)
        body["context"]["encounterId"] = eid
        del body["prefetch"]["patient"]
        body["fhirServer"] = fhir.base + "/fhir"
        resp = client.post(TRIAGE, json=body)
    assert resp.status_code == 412, resp.text
    assert _expressions(resp) == ["prefetch.patient"]
    assert "nested more than" in resp.text


# --- NUL characters and unpaired surrogates (PostgreSQL stores neither) -------------------------


@pytest.mark.parametrize("bad", ["chest\x00pain", "chest \ud800 pain"])
def test_a_nul_or_a_lone_surrogate_in_the_body_is_400_naming_where_and_logs_no_text(
    client: TestClient, database_url: str, bad: str, caplog: pytest.LogCaptureFixture
) -> None:
    body = triage_body()
    body["prefetch"]["encounter"]["reasonCode"] = [{"text": bad}]
    raw = json.dumps(body)  # ASCII: the surrogate travels as the escape "\ud800"
    with caplog.at_level(logging.DEBUG):
        resp = client.post(TRIAGE, content=raw, headers={"content-type": "application/json"})
    assert resp.status_code == 400, resp.text
    assert _expressions(resp) == ["prefetch.encounter.reasonCode[0].text"]
    assert "retry" not in resp.text
    assert "chest" not in caplog.text
    assert _runs(database_url) == 0
    fine = triage_body()
    assert client.post(TRIAGE, json=fine).status_code == 200


def test_a_nul_in_feedback_is_400(client: TestClient) -> None:
    item = {"card": "a\x00b", "outcome": "accepted", "outcomeTimestamp": "2025-01-01T00:00:00Z"}
    resp = client.post(TRIAGE + "/feedback", json={"feedback": [item]})
    assert resp.status_code == 400, resp.text
    assert _expressions(resp) == ["feedback[0].card"]


def test_a_nul_in_facts_for_a_run_route_is_400(client: TestClient) -> None:
    resp = client.post("/workflows/Triage/runs", json={"instances": [], "text": "a\x00b"})
    assert resp.status_code == 400, resp.text
    assert resp.json()["field"] == "text"


@pytest.mark.parametrize("run_id", ["%00", "a%00b", "x" * 5000])
def test_a_run_id_that_cannot_exist_is_404(client: TestClient, run_id: str) -> None:
    for accept in ("application/json", "text/html"):
        resp = client.get(f"/runs/{run_id}", headers={"accept": accept})
        assert resp.status_code == 404, resp.text
    assert client.post(f"/runs/{run_id}/replay").status_code == 404
    assert client.post(f"/runs/{run_id}/resume", json={}).status_code == 404


# --- huge ids -----------------------------------------------------------------------------------


def test_a_megabyte_card_id_in_feedback_is_400_naming_it(client: TestClient) -> None:
    item = {"card": "c" * 1_000_000, "outcome": "accepted", "outcomeTimestamp": "2025-01-01T00:00Z"}
    resp = client.post(TRIAGE + "/feedback", json={"feedback": [item]})
    assert resp.status_code == 400, resp.text[:500]
    assert _expressions(resp) == ["feedback[0].card"]
    assert len(resp.content) < 5_000  # the id is not echoed back


# --- JWTs with absurd dates ----------------------------------------------------------------------


def _signed(claims: dict[str, Any]) -> str:
    key = ECKey.import_key(SPEC_JWT["private_jwk"])
    head = {"alg": "ES384", "kid": "example-kid", "typ": "JWT"}
    return jwt.encode(head, claims, key, algorithms=["ES384"])


def _claims(**over: Any) -> dict[str, Any]:
    now = int(time.time())
    claims = {"iss": ISS, "aud": BASE + TRIAGE, "iat": now, "exp": now + 300}
    claims["jti"] = str(uuid.uuid4())
    claims.update(over)
    return claims


@pytest.fixture
def secured(make_app_client: OpenClient) -> Iterator[TestClient]:
    issuers = [{"iss": ISS, "jwks": SPEC_JWT["jwks"]}]
    with make_app_client(public_base_url=BASE, trusted_issuers=issuers) as c:
        yield c


@pytest.mark.parametrize(
    ("case", "over"),
    [
        ("exp far in the future", {"exp": 1e20}),
        ("exp nan", {"exp": "nan"}),
        ("exp a string", {"exp": str(int(time.time()) + 300)}),
        ("iat a string", {"iat": str(int(time.time()))}),
        ("exp a boolean", {"exp": True}),
        ("lives a day", {"exp": int(time.time()) + 86_400}),
    ],
)
def test_a_jwt_with_absurd_dates_is_401(
    secured: TestClient, database_url: str, case: str, over: dict[str, Any]
) -> None:
    token = _signed(_claims(**over))
    resp = secured.post(TRIAGE, json=triage_body(), headers={"authorization": f"Bearer {token}"})
    assert resp.status_code == 401, (case, resp.text)
    assert _expressions(resp) == ["Authorization"]
    assert _runs(database_url) == 0
    good = _signed(_claims())
    ok = secured.post(TRIAGE, json=triage_body(), headers={"authorization": f"Bearer {good}"})
    assert ok.status_code == 200, ok.text


def test_a_jwt_payload_nested_a_thousand_deep_is_401(secured: TestClient) -> None:
    def b64(raw: str) -> str:
        return base64.urlsafe_b64encode(raw.encode()).rstrip(b"=").decode()

    head = b64(json.dumps({"alg": "ES384", "kid": "example-kid"}))
    payload = b64(json.dumps(_claims())[:-1] + f', "x": {DEEP}}}')
    resp = secured.post(
        TRIAGE, json=triage_body(), headers={"authorization": f"Bearer {head}.{payload}.c2ln"}
    )
    assert resp.status_code == 401, resp.text


# --- the database is down -----------------------------------------------------------------------


def test_the_run_routes_answer_503_while_the_database_is_down(make_app_client: OpenClient) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    down = f"postgresql://nobody@127.0.0.1:{port}/none"
    with make_app_client(database_url=down) as c:
        run_id = str(uuid.uuid4())
        calls = [
            c.get(f"/runs/{run_id}"),
            c.get(f"/runs/{run_id}", headers={"accept": "text/html"}),
            c.post(f"/runs/{run_id}/replay"),
            c.post(f"/runs/{run_id}/resume", json={}),
            c.post("/workflows/Triage/runs", json={"instances": []}),
            c.post(TRIAGE, json=triage_body()),
            c.post(
                TRIAGE + "/feedback",
                json={
                    "feedback": [
                        {
                            "card": "c",
                            "outcome": "accepted",
                            "outcomeTimestamp": "2025-01-01T00:00:00Z",
                        }
                    ]
                },
            ),
        ]
        for resp in calls:
            assert resp.status_code == 503, (resp.request.url, resp.text)
            assert resp.headers.get("retry-after")
