"""Hardening of the HTTP surface: a value the World's gate refuses, authenticated run routes,
fhirServer restrictions, bounded reads (real database, real HTTP through the ASGI app)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from joserfc import jwt
from joserfc.jwk import ECKey
from sqlalchemy import select, text

from app.store import jtis, make_engine, session_scope
from app.store.models import SeenJti
from tests.cds import clinical as fx
from tests.cds.card_markdown import decision_record_text

BASE = "https://cds.example.test"
TEMP = "8310-5"
SPEC_JWT = json.loads(
    (
        Path(__file__).parents[1] / "data/cds/fixtures/jwt-es384-example-expired-spec.json"
    ).read_text()
)
ISS = SPEC_JWT["payload"]["iss"]

OpenClient = Callable[..., AbstractContextManager[TestClient]]


@pytest.fixture
def client(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client(public_base_url=BASE) as c:
        yield c


def triage_body(*vitals: dict[str, Any], pid: str | None = None) -> dict[str, Any]:
    pid = pid or fx.new_id()
    eid = fx.new_id()
    return fx.hook_request(
        "encounter-start",
        {"patientId": pid, "encounterId": eid},
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid),
            "encounter": fx.encounter(eid, pid),
            "vitals": fx.searchset(list(vitals)),
            "conditions": fx.searchset([]),
        },
    )


def _statuses(database_url: str) -> list[str]:
    eng = make_engine(database_url)
    try:
        with eng.connect() as conn:
            return [str(s) for s in conn.execute(text("SELECT status FROM runs")).scalars()]
    finally:
        eng.dispose()


# --- a FHIR value the World's gate refuses ---------------------------------------------------


def test_a_temperature_the_gate_refuses_is_a_recorded_violation_not_a_500(
    client: TestClient, database_url: str
) -> None:
    pid = fx.new_id()
    body = triage_body(fx.observation(pid, TEMP, 50, "Cel"), pid=pid)
    resp = client.post("/cds-services/horismos-triage", json=body)
    assert resp.status_code == 200, resp.text
    answer = resp.json()
    run = answer["extension"]["dev.horismos.run"]
    # the temperature is not used, and could change the acuity: triage does not decide
    assert run["terminal"] == "EscalateIncomplete"
    [card] = answer["cards"]
    assert "refused input" in card["detail"].lower()
    assert "Body temperature reading not used" in decision_record_text(client, card)
    assert "running" not in _statuses(database_url)
    stored = client.get(f"/runs/{run['runId']}").json()
    assert any("50" in json_text(v) for v in stored["inputViolations"])
    again = client.post("/cds-services/horismos-triage", json=body)  # the EHR retries
    assert again.status_code == 200
    assert again.json() == answer


def json_text(value: Any) -> str:
    import json

    return json.dumps(value)


def test_a_run_that_breaks_after_its_claim_is_failed_not_left_running(
    client: TestClient, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.cds.render as render

    monkeypatch.setattr(render, "check_response", lambda _resp: ["cards[0]: broken on purpose"])
    body = triage_body()
    resp = client.post("/cds-services/horismos-triage", json=body)
    assert resp.status_code == 500
    outcome = resp.json()
    assert outcome["resourceType"] == "OperationOutcome"
    assert (
        "recorded as failed" in outcome["issue"][0]["diagnostics"]
        or "breaks" in (outcome["issue"][0]["diagnostics"])
    )
    assert _statuses(database_url) == ["failed"]
    retry = client.post("/cds-services/horismos-triage", json=body)
    assert retry.status_code == 409  # answered at once, not after waiting for a stuck run
    assert "new hookInstance" in retry.json()["issue"][0]["diagnostics"]


# --- the run routes need the client JWT when trusted issuers are configured ------------------


@pytest.fixture
def secured(make_app_client: OpenClient) -> Iterator[TestClient]:
    issuers = [{"iss": ISS, "jwks": SPEC_JWT["jwks"]}]
    with make_app_client(public_base_url=BASE, trusted_issuers=issuers) as c:
        yield c


def _token(path: str, **claims: Any) -> dict[str, str]:
    now = int(time.time())
    payload = {"iss": ISS, "aud": BASE + path, "iat": now, "exp": now + 300}
    payload["jti"] = str(uuid.uuid4())
    payload.update(claims)
    key = ECKey.import_key(SPEC_JWT["private_jwk"])
    token = jwt.encode(
        {"alg": "ES384", "kid": "example-kid", "typ": "JWT"}, payload, key, algorithms=["ES384"]
    )
    return {"Authorization": f"Bearer {token}"}


def _hook_run(c: TestClient, headers: dict[str, str] | None = None) -> str:
    resp = c.post("/cds-services/horismos-triage", json=triage_body(), headers=headers or {})
    assert resp.status_code == 200, resp.text
    return str(resp.json()["extension"]["dev.horismos.run"]["runId"])


def test_run_routes_refuse_callers_without_a_client_jwt(secured: TestClient) -> None:
    run_id = _hook_run(secured, _token("/cds-services/horismos-triage"))
    calls: list[tuple[str, str, dict[str, Any] | None]] = [
        ("GET", f"/runs/{run_id}", None),
        ("POST", f"/runs/{run_id}/replay", None),
        ("POST", f"/runs/{run_id}/resume", {}),
        ("POST", "/workflows/TriageWorkflow/runs", {"instances": []}),
    ]
    for method, path, body in calls:
        resp = secured.request(method, path, json=body)
        assert resp.status_code == 401, (path, resp.text)
        assert resp.headers["www-authenticate"].startswith("Bearer")
        assert ISS not in resp.text and "patient" not in resp.text.lower()
        wrong_aud = secured.request(method, path, json=body, headers=_token("/runs/elsewhere"))
        assert wrong_aud.status_code == 401, path
    read = secured.get(f"/runs/{run_id}", headers=_token(f"/runs/{run_id}"))
    assert read.status_code == 200
    assert read.json()["terminal"] == "EscalateIncomplete"
    replayed = secured.post(f"/runs/{run_id}/replay", headers=_token(f"/runs/{run_id}/replay"))
    assert replayed.status_code == 200
    assert replayed.json()["same"] is True


def test_run_routes_stay_open_in_open_mode(client: TestClient) -> None:
    run_id = _hook_run(client)
    assert client.get(f"/runs/{run_id}").status_code == 200


def test_a_token_id_is_remembered_until_the_token_stops_being_accepted(
    secured: TestClient, database_url: str
) -> None:
    exp = int(time.time()) + 120
    headers = _token("/cds-services/horismos-triage", exp=exp)
    _hook_run(secured, headers)
    eng = make_engine(database_url)
    try:
        with session_scope(eng) as session:
            [until] = session.execute(select(SeenJti.expires_at)).scalars()
    finally:
        eng.dispose()
    assert until == datetime.fromtimestamp(exp + 30, UTC)  # exp plus the 30 s leeway


def test_the_periodic_task_forgets_token_ids_of_expired_tokens(
    make_app_client: OpenClient, database_url: str
) -> None:
    from app.api.maintenance import tick

    now = datetime.now(UTC)
    with make_app_client(reconcile_interval_seconds=0) as c:
        eng = c.app.state.container.running.engine  # type: ignore[attr-defined]
        with session_scope(eng) as session:
            assert jtis.remember_jti(session, ISS, "old", now - timedelta(seconds=1))
            assert jtis.remember_jti(session, ISS, "live", now + timedelta(minutes=5))
        report = tick(c.app, now=now)  # type: ignore[arg-type]
        assert report.forgotten_jtis == 1
        with session_scope(eng) as session:
            left = session.execute(select(SeenJti.jti)).scalars().all()
        assert left == ["live"]


# --- fhirServer: which servers, which URLs, what the caller learns ---------------------------


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _triage_without_prefetch(fhir_server: str) -> dict[str, Any]:
    return fx.hook_request(
        "encounter-start",
        {"patientId": fx.new_id(), "encounterId": fx.new_id()},
        fhir_server=fhir_server,
    )


@pytest.mark.parametrize(
    "server",
    [
        "http://127.0.0.1:8080/fhir",
        "http://169.254.169.254/latest",
        "https://ehr.example.test.evil.example/fhir",
        "https://ehr.example.test/fhir-other",
        "http://ehr.example.test/fhir",
    ],
)
def test_a_fhir_server_outside_the_allowed_list_is_400_naming_the_field(
    make_app_client: OpenClient, server: str
) -> None:
    with make_app_client(allowed_fhir_servers=["https://ehr.example.test/fhir"]) as c:
        resp = c.post("/cds-services/horismos-triage", json=_triage_without_prefetch(server))
        assert resp.status_code == 400, resp.text
        [issue] = resp.json()["issue"]
        assert issue["expression"] == ["fhirServer"]
        allowed = triage_body()
        allowed["fhirServer"] = "https://ehr.example.test/fhir/r4"
        ok = c.post("/cds-services/horismos-triage", json=allowed)
        assert ok.status_code == 200, ok.text  # everything was prefetched: nothing is read


def test_an_unreachable_fhir_server_is_412_without_the_connection_error(
    client: TestClient,
) -> None:
    body = _triage_without_prefetch(f"http://127.0.0.1:{_closed_port()}/fhir")
    resp = client.post("/cds-services/horismos-triage", json=body)
    assert resp.status_code == 412
    issues = resp.json()["issue"]
    assert {i["expression"][0] for i in issues} >= {"prefetch.patient", "prefetch.vitals"}
    for issue in issues:
        assert "could not be reached" in issue["diagnostics"]
        for leak in ("Errno", "refused", "Connect", "127.0.0.1"):
            assert leak not in issue["diagnostics"]


@pytest.mark.parametrize("server", ["https://host:abc", "https://host:99999/fhir", "https://a b/"])
def test_a_fhir_server_that_is_not_a_url_is_400_naming_the_field(
    client: TestClient, server: str
) -> None:
    resp = client.post("/cds-services/horismos-triage", json=_triage_without_prefetch(server))
    assert resp.status_code == 400, resp.text
    assert resp.json()["issue"][0]["expression"] == ["fhirServer"]


def test_allowed_fhir_servers_are_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from app.settings import Settings

    monkeypatch.setenv("HORISMOS_ALLOWED_FHIR_SERVERS", "https://a.example/fhir, https://b.example")
    assert Settings().allowed_fhir_servers == ["https://a.example/fhir", "https://b.example"]


# --- bounded reads ----------------------------------------------------------------------------


def test_a_request_body_over_the_limit_is_413_with_an_operation_outcome(
    make_app_client: OpenClient, database_url: str
) -> None:
    with make_app_client(max_request_bytes=2_000) as c:
        body = triage_body()
        body["extension"] = {"padding": "x" * 5_000}
        resp = c.post("/cds-services/horismos-triage", json=body)
        assert resp.status_code == 413
        assert resp.json()["resourceType"] == "OperationOutcome"
        assert "2000 bytes" in resp.json()["issue"][0]["diagnostics"]
        chunked = c.post(
            "/cds-services/horismos-triage",
            content=iter([json_text(body).encode()]),  # no Content-Length: streamed
            headers={"Content-Type": "application/json"},
        )
        assert chunked.status_code == 413
        assert c.post("/cds-services/horismos-triage", json=triage_body()).status_code == 200
    assert _statuses(database_url) == ["completed"]


# --- no patient data or tokens in logs and reprs ----------------------------------------------


def test_a_failing_statement_does_not_carry_its_values(database_url: str) -> None:
    from sqlalchemy.exc import DBAPIError

    eng = make_engine(database_url)
    try:
        with pytest.raises(DBAPIError) as info, eng.connect() as conn:
            conn.execute(text("INSERT INTO no_such_table VALUES (:v)"), {"v": "Jane Doe 1970"})
    finally:
        eng.dispose()
    assert "Jane Doe" not in str(info.value)


def test_access_tokens_are_not_in_reprs() -> None:
    from adapters.fhir.commit import CommitContext
    from app.cds.requests import parse_hook_request

    ctx = CommitContext(fhir_server="https://ehr.example.test/fhir", access_token="s3cr3t-tok")
    assert "s3cr3t-tok" not in repr(ctx)
    body = _triage_without_prefetch("https://ehr.example.test/fhir")
    body["fhirAuthorization"]["access_token"] = "s3cr3t-tok"
    assert "s3cr3t-tok" not in repr(parse_hook_request(body))


def test_notify_logs_argument_names_not_values(caplog: pytest.LogCaptureFixture) -> None:
    from app.ontology.model import XSD, EffectDecl, ToolArg, ToolDef
    from app.tools import ToolInvoker

    ns = "https://example.test/ns#"
    tool = ToolDef(
        iri=ns + "page",
        name="page",
        args=(ToolArg(name="patient", type=ns + "P"),),
        effects=(EffectDecl(property=ns + "ref", type=XSD + "string"),),
        binding="python:app.tools.builtin.notify",
    )
    with caplog.at_level("INFO", logger="horismos.notify"):
        ToolInvoker().invoke(tool, {"patient": "Jane Doe 1970"}, timeout=5, run_id="r1")
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "patient" in logged
    assert "Jane Doe" not in logged
