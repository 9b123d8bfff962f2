"""The CDS Hooks endpoints as an EHR sees them: discovery, errors, client JWTs, idempotency,
durability and feedback (real database on both backends, real HTTP through the ASGI app)."""

from __future__ import annotations

import base64
import copy
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from joserfc import jwt
from joserfc.jwk import ECKey, OctKey
from sqlalchemy import Engine, text

from app.cds.response_check import check_response
from app.cds.routes import add_feedback_listener
from app.store import Base, make_engine, repo, session_scope
from app.store import feedback as feedback_store
from tests.cds import clinical as fx

FIXTURES = Path(__file__).parents[1] / "data/cds/fixtures"
BASE = "https://cds.example.test"
SPEC_JWT = json.loads((FIXTURES / "jwt-es384-example-expired-spec.json").read_text())
ISS = SPEC_JWT["payload"]["iss"]

OpenClient = Callable[..., AbstractContextManager[TestClient]]


@pytest.fixture
def client(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client(public_base_url=BASE) as c:
        yield c


def _runs(database_url: str) -> int:
    eng = make_engine(database_url)
    try:
        with eng.connect() as conn:
            return int(conn.execute(text("SELECT count(*) FROM runs")).scalar_one())
    finally:
        eng.dispose()


# --- discovery and errors ------------------------------------------------------------------


def test_discovery_lists_the_ontology_services(client: TestClient) -> None:
    each = {s["id"]: s for s in client.get("/individual/cds-services").json()["services"]}
    assert each["horismos-triage"]["hook"] == "encounter-start"
    assert each["horismos-triage"]["prefetch"]["vitals"] == (
        "Observation?patient={{context.patientId}}&category=vital-signs"
    )
    assert each["horismos-med-safety"]["hook"] == "order-sign"
    assert set(each["horismos-med-safety"]["prefetch"]) == {"patient", "allergies", "labs"}


def test_the_default_discovery_lists_combined_services_in_place_of_their_parts(
    client: TestClient,
) -> None:
    """What a client may register all of: a combined service, not the services it combines
    (each finding would show twice); its prefetch asks each query of its services once."""
    listed = {s["id"]: s for s in client.get("/cds-services").json()["services"]}
    each = {s["id"]: s for s in client.get("/individual/cds-services").json()["services"]}

    assert "horismos-med-safety" not in listed and "opioidcds-08" not in listed
    assert listed["horismos-triage"] == each["horismos-triage"]
    signing = listed["opioidcds-order-sign"]
    assert signing["hook"] == "order-sign"
    queries = {
        q for sid in ("horismos-med-safety", "opioidcds-08") for q in each[sid]["prefetch"].values()
    }
    assert queries <= set(signing["prefetch"].values())
    assert len(set(signing["prefetch"].values())) == len(signing["prefetch"])


def test_unknown_service_is_404_with_an_operation_outcome(client: TestClient) -> None:
    resp = client.post("/cds-services/nope", json=fx.med_safety_body())
    assert resp.status_code == 404
    assert resp.json()["resourceType"] == "OperationOutcome"


def test_invalid_request_is_400_naming_the_field(client: TestClient) -> None:
    body = fx.med_safety_body()
    del body["context"]["patientId"]
    resp = client.post("/cds-services/horismos-med-safety", json=body)
    assert resp.status_code == 400
    assert resp.json()["issue"][0]["expression"] == ["context.patientId"]


def test_wrong_hook_for_the_service_is_400(client: TestClient) -> None:
    body = json.loads(
        (FIXTURES / "unknown-hook-fancy-structure-request-crd-testkit.json").read_text()
    )
    resp = client.post("/cds-services/horismos-triage", json=body)
    assert resp.status_code == 400
    assert resp.json()["issue"][0]["expression"] == ["hook"]


def test_non_json_body_is_400(client: TestClient) -> None:
    resp = client.post(
        "/cds-services/horismos-triage",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert resp.status_code == 400


def test_a_draft_order_with_one_object_for_a_list_is_read_and_a_malformed_one_is_not_checked(
    client: TestClient,
) -> None:
    body = fx.med_safety_body()
    pid = body["context"]["patientId"]
    crd = json.loads((FIXTURES / "order-sign-request-crd-testkit.json").read_text())
    one_object = crd["context"]["draftOrders"]["entry"][1]  # doseAndRate: {…}
    one_object["resource"]["subject"] = {"reference": f"Patient/{pid}"}
    malformed = copy.deepcopy(one_object)
    malformed["resource"]["id"] = "malformed"
    malformed["resource"]["authoredOn"] = "yesterday"
    body["context"]["draftOrders"]["entry"] += [one_object, malformed]

    resp = client.post("/cds-services/horismos-med-safety", json=body)

    assert resp.status_code == 200, resp.text
    unread, decided = resp.json()["cards"]
    assert unread["summary"].startswith("Amoxicillin 120 MG/ML")
    assert unread["summary"].endswith("not checked: the draft order could not be read")
    assert "MedicationRequest/malformed" in unread["detail"]
    assert "authoredOn" in unread["detail"]
    assert decided["indicator"] == "critical"  # the other draft orders were still checked
    run_id = resp.json()["extension"]["dev.horismos.run"]["runId"]
    notes = client.get(f"/runs/{run_id}").json()["dataQuality"]
    assert [(n["rule"], n["field"]) for n in notes] == [
        (
            "single-as-list",
            "context.draftOrders.entry[1].resource.dosageInstruction[0].doseAndRate",
        ),
        ("unread-draft-order", "context.draftOrders.entry[2].resource.authoredOn"),
    ]


def test_crd_request_without_prefetch_and_unreachable_server_is_412(client: TestClient) -> None:
    body = json.loads((FIXTURES / "encounter-start-request-crd-testkit.json").read_text())
    body["fhirServer"] = "http://127.0.0.1:9/fhir"  # nothing listens on the discard port
    resp = client.post("/cds-services/horismos-triage", json=body)
    assert resp.status_code == 412
    keys = {e for i in resp.json()["issue"] for e in i["expression"]}
    assert keys == {
        "prefetch.patient",
        "prefetch.encounter",
        "prefetch.vitals",
        "prefetch.conditions",
    }


# --- idempotency and durability ------------------------------------------------------------


def test_retried_hook_instance_returns_the_stored_answer_without_running_again(
    client: TestClient, database_url: str
) -> None:
    body = fx.med_safety_body()
    first = client.post("/cds-services/horismos-med-safety", json=body)
    second = client.post("/cds-services/horismos-med-safety", json=body)
    assert first.status_code == second.status_code == 200
    assert first.json() == second.json()
    assert _runs(database_url) == 1


def test_same_hook_instance_with_a_different_body_is_409(client: TestClient) -> None:
    body = fx.med_safety_body()
    assert client.post("/cds-services/horismos-med-safety", json=body).status_code == 200
    body["context"]["draftOrders"]["entry"][0]["resource"]["id"] = "another-order"
    resp = client.post("/cds-services/horismos-med-safety", json=body)
    assert resp.status_code == 409
    assert resp.json()["issue"][0]["expression"] == ["hookInstance"]


def test_two_concurrent_identical_calls_run_once(client: TestClient, database_url: str) -> None:
    body = fx.med_safety_body()
    answers: list[Any] = []
    barrier = threading.Barrier(2)

    def call() -> None:
        barrier.wait()
        answers.append(client.post("/cds-services/horismos-med-safety", json=body))

    threads = [threading.Thread(target=call) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [a.status_code for a in answers] == [200, 200]
    assert answers[0].json() == answers[1].json()
    assert _runs(database_url) == 1


def test_run_that_cannot_be_persisted_is_503_and_returns_no_decision(
    client: TestClient, database_url: str
) -> None:
    eng = make_engine(database_url)
    traces = Base.metadata.tables["trace_events"]
    try:
        with eng.begin() as conn:  # the trace table disappears: claims work, outcomes cannot land
            traces.drop(conn)
        resp = client.post("/cds-services/horismos-med-safety", json=fx.med_safety_body())
    finally:
        with eng.begin() as conn:
            traces.create(conn)
        eng.dispose()
    assert resp.status_code == 503
    assert "Contraindicated" not in resp.text
    assert resp.json()["resourceType"] == "OperationOutcome"


def test_response_carries_the_run_extension_and_is_persisted_first(
    client: TestClient, engine: Engine
) -> None:
    resp = client.post("/cds-services/horismos-med-safety", json=fx.med_safety_body())
    body = resp.json()
    assert check_response(body) == []
    run = body["extension"]["dev.horismos.run"]
    assert run["workflow"] == "MedSafety" and run["version"] == "1.1.0"
    assert run["terminal"] == "Done"
    assert run["decision"] == {"property": "orderSafety", "value": "Contraindicated"}
    with session_scope(engine) as session:
        stored = repo.get_run(session, run["runId"])
        assert stored is not None and stored.response == body
        assert stored.status == "completed"
        assert {(s.resource_type) for s in repo.list_sources(session, run["runId"])} == {
            "Patient",
            "Observation",
            "MedicationRequest",
        }
        assert repo.list_trace(session, run["runId"])


def test_no_card_when_there_is_nothing_to_say(client: TestClient) -> None:
    body = client.post(
        "/cds-services/horismos-med-safety",
        json=fx.med_safety_body(egfr=90, rx="29046", potassium=4.5),
    ).json()
    assert body["cards"] == []
    assert body["extension"]["dev.horismos.run"]["decision"]["value"] == "Safe"


# --- feedback ------------------------------------------------------------------------------


def test_feedback_is_stored_linked_to_the_run_and_duplicates_are_harmless(
    client: TestClient, engine: Engine
) -> None:
    heard: list[Any] = []
    add_feedback_listener(client.app, heard.append)  # type: ignore[arg-type]
    answer = client.post("/cds-services/horismos-med-safety", json=fx.med_safety_body()).json()
    card = answer["cards"][0]
    feedback = {
        "feedback": [
            {
                "card": card["uuid"],
                "outcome": "accepted",
                "acceptedSuggestions": [{"id": card["suggestions"][0]["uuid"]}],
                "outcomeTimestamp": "2025-06-01T10:05:31Z",
            }
        ]
    }
    first = client.post("/cds-services/horismos-med-safety/feedback", json=feedback)
    again = client.post("/cds-services/horismos-med-safety/feedback", json=feedback)
    assert first.json() == {"stored": 1, "duplicates": 0}
    assert again.json() == {"stored": 0, "duplicates": 1}
    with session_scope(engine) as session:
        [row] = feedback_store.list_feedback(session, service_id="horismos-med-safety")
        assert row.run_id == answer["extension"]["dev.horismos.run"]["runId"]
    [event] = heard
    assert event.accepted_suggestions == (card["suggestions"][0]["uuid"],)
    assert event.card["suggestions"][0]["actions"][0]["type"] == "delete"


@pytest.mark.parametrize(
    "name", ["feedback-overridden-no-reason-spec.json", "feedback-overridden-with-reason-spec.json"]
)
def test_spec_feedback_bodies_are_accepted(client: TestClient, name: str) -> None:
    answer = client.post("/cds-services/horismos-med-safety", json=fx.med_safety_body()).json()
    body = json.loads((FIXTURES / name).read_text())
    body["feedback"][0]["card"] = answer["cards"][0]["uuid"]  # a card this service returned
    resp = client.post("/cds-services/horismos-med-safety/feedback", json=body)
    assert resp.status_code == 200, resp.text
    assert resp.json()["stored"] == 1


def test_feedback_with_a_bad_outcome_is_400(client: TestClient) -> None:
    body = {
        "feedback": [
            {"card": "x", "outcome": "ignored", "outcomeTimestamp": "2025-01-01T00:00:00Z"}
        ]
    }
    resp = client.post("/cds-services/horismos-triage/feedback", json=body)
    assert resp.status_code == 400
    assert resp.json()["issue"][0]["expression"] == ["feedback[0].outcome"]


# --- client JWTs over HTTP -----------------------------------------------------------------


@pytest.fixture
def secured(make_app_client: OpenClient) -> Iterator[TestClient]:
    issuers = [{"iss": ISS, "jwks": SPEC_JWT["jwks"]}]
    with make_app_client(public_base_url=BASE, trusted_issuers=issuers) as c:
        yield c


def _token(aud: str, **claims: Any) -> str:
    now = int(time.time())
    payload = {"iss": ISS, "aud": aud, "iat": now, "exp": now + 300, "jti": str(uuid.uuid4())}
    payload.update(claims)
    key = ECKey.import_key(SPEC_JWT["private_jwk"])
    return jwt.encode(
        {"alg": "ES384", "kid": "example-kid", "typ": "JWT"}, payload, key, algorithms=["ES384"]
    )


def test_signed_client_is_served_and_replay_is_401(secured: TestClient) -> None:
    url = "/cds-services/horismos-med-safety"
    token = _token(BASE + url)
    ok = secured.post(url, json=fx.med_safety_body(), headers={"Authorization": f"Bearer {token}"})
    assert ok.status_code == 200
    replay = secured.post(
        url, json=fx.med_safety_body(), headers={"Authorization": f"Bearer {token}"}
    )
    assert replay.status_code == 401
    assert "replay" in replay.json()["issue"][0]["diagnostics"]


def test_missing_or_misaddressed_token_is_401(secured: TestClient) -> None:
    url = "/cds-services/horismos-med-safety"
    assert secured.post(url, json=fx.med_safety_body()).status_code == 401
    other = _token(BASE + "/cds-services/horismos-triage")
    resp = secured.post(
        url, json=fx.med_safety_body(), headers={"Authorization": f"Bearer {other}"}
    )
    assert resp.status_code == 401
    assert resp.headers["www-authenticate"].startswith("Bearer")


def _bad_token(case: str, aud: str) -> str:
    now = int(time.time())
    claims = {"iss": ISS, "aud": aud, "iat": now, "exp": now + 300, "jti": str(uuid.uuid4())}
    if case == "expired":
        return _token(aud, iat=now - 7200, exp=now - 3600)
    if case == "untrusted iss":
        return _token(aud, iss="https://untrusted.example/")
    if case == "unknown kid":
        key = ECKey.import_key(SPEC_JWT["private_jwk"])
        header = {"alg": "ES384", "kid": "rotated-away", "typ": "JWT"}
        return jwt.encode(header, claims, key, algorithms=["ES384"])
    if case == "HS256":
        header = {"alg": "HS256", "kid": "example-kid", "typ": "JWT"}
        return jwt.encode(header, claims, OctKey.generate_key(256), algorithms=["HS256"])
    assert case == "alg none"

    def enc(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{enc({'alg': 'none', 'typ': 'JWT', 'kid': 'example-kid'})}.{enc(claims)}."


@pytest.mark.parametrize("case", ["expired", "alg none", "HS256", "unknown kid", "untrusted iss"])
def test_a_bad_client_token_is_401_over_http_and_runs_nothing(
    secured: TestClient, case: str
) -> None:
    url = "/cds-services/horismos-med-safety"
    body = fx.med_safety_body()
    headers = {"Authorization": f"Bearer {_bad_token(case, BASE + url)}"}
    resp = secured.post(url, json=body, headers=headers)
    assert resp.status_code == 401, resp.text
    assert resp.json()["resourceType"] == "OperationOutcome"
    engine: Engine = secured.app.state.container.running.engine  # type: ignore[attr-defined]
    with engine.connect() as conn:
        claimed = conn.execute(
            text("SELECT count(*) FROM runs WHERE hook_instance = :h"), {"h": body["hookInstance"]}
        ).scalar_one()
    assert claimed == 0


def test_a_hook_run_is_readable_and_replays_to_the_same_decision(client: TestClient) -> None:
    answer = client.post("/cds-services/horismos-med-safety", json=fx.med_safety_body()).json()
    run_id = answer["extension"]["dev.horismos.run"]["runId"]
    stored = client.get(f"/runs/{run_id}")
    assert stored.status_code == 200
    assert stored.json()["decision"] == {"property": "orderSafety", "value": "Contraindicated"}
    replay = client.post(f"/runs/{run_id}/replay")
    assert replay.status_code == 200, replay.text
    assert replay.json()["same"] is True


def test_browser_clients_from_configured_origins_pass_cors(make_app_client: OpenClient) -> None:
    sandbox = "https://sandbox.cds-hooks.org"
    with make_app_client(cors_origins=[sandbox]) as c:
        preflight = c.options(
            "/cds-services/horismos-triage",
            headers={
                "Origin": sandbox,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,content-type",
            },
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == sandbox
        other = c.get("/cds-services", headers={"Origin": "https://elsewhere.example"})
        assert "access-control-allow-origin" not in other.headers


SANDBOX_PREFLIGHT = {
    "Origin": "https://sandbox.cds-hooks.org",
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "content-type",
}


def test_the_start_lists_the_cors_origins(
    make_app_client: OpenClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="horismos.cors"):
        with make_app_client(cors_origins=["https://sandbox.cds-hooks.org"]):
            pass
        with make_app_client():
            pass
    lines = [r.getMessage() for r in caplog.records if r.name == "horismos.cors"]
    assert lines[0] == "CORS: browser clients may call from https://sandbox.cds-hooks.org"
    assert lines[1].startswith(
        "CORS: no browser origin is allowed (HORISMOS_CORS_ORIGINS is empty)"
    )


@pytest.mark.parametrize("allowed", [[], ["https://ehr.example"]], ids=["none", "another"])
def test_a_refused_browser_origin_is_logged_once_saying_what_to_set(
    make_app_client: OpenClient, caplog: pytest.LogCaptureFixture, allowed: list[str]
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="horismos.cors"),
        make_app_client(cors_origins=allowed, public_base_url="https://cds.example.org") as c,
    ):
        first = c.options("/cds-services/horismos-triage", headers=SANDBOX_PREFLIGHT)
        c.options("/cds-services/horismos-triage", headers=SANDBOX_PREFLIGHT)
        # the service's own pages and programs without an Origin are not browsers refused
        c.get("/cds-services", headers={"Origin": "http://testserver"})
        c.get("/cds-services", headers={"Origin": "https://cds.example.org"})  # behind a proxy
        c.get("/cds-services")
    assert "access-control-allow-origin" not in first.headers
    [line] = [r.getMessage() for r in caplog.records if r.name == "horismos.cors"]
    assert line.startswith(
        "CORS: refused a browser preflight from origin https://sandbox.cds-hooks.org "
        "(POST /cds-services/horismos-triage): it is not in HORISMOS_CORS_ORIGINS"
    )
