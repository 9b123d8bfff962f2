"""Hardening of the HTTP surface: a value the World's gate refuses, authenticated run routes,
fhirServer restrictions, bounded reads (real database, real HTTP through the ASGI app)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.store import make_engine
from tests.cds import clinical as fx

BASE = "https://cds.example.test"
TEMP = "8310-5"

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
    assert run["terminal"] == "EscalateToNurse"  # the temperature is missing for the rules
    [card] = answer["cards"]
    assert "refused input" in card["detail"].lower()
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
    import app.cds.service as service

    monkeypatch.setattr(service, "check_response", lambda _resp: ["cards[0]: broken on purpose"])
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
