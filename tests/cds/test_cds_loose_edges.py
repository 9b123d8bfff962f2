"""Loose edges an EHR integrator would trip over: bodies not declared as JSON, one hookInstance
spelled several ways (real database on both backends, real HTTP through the ASGI app)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.store import make_engine
from tests.cds import clinical as fx

OpenClient = Callable[..., AbstractContextManager[TestClient]]
TRIAGE = "/cds-services/horismos-triage"


@pytest.fixture
def client(make_app_client: OpenClient) -> Iterator[TestClient]:
    with make_app_client(public_base_url="https://cds.example.test") as c:
        yield c


def triage_body() -> dict[str, Any]:
    pid, eid = fx.new_id(), fx.new_id()
    return fx.hook_request(
        "encounter-start",
        {"patientId": pid, "encounterId": eid},
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid),
            "encounter": fx.encounter(eid, pid),
            "vitals": fx.searchset([]),
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


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", None],
)
def test_a_body_not_declared_as_json_starts_nothing(
    client: TestClient, database_url: str, content_type: str | None
) -> None:
    """A cross-origin page may POST text/plain (or a typeless blob) without a CORS preflight."""
    raw = json.dumps(triage_body())
    headers = {"content-type": content_type} if content_type else {}
    resp = client.post(TRIAGE, content=raw, headers=headers)
    assert resp.status_code == 415, resp.text
    assert resp.json()["issue"][0]["expression"] == ["Content-Type"]
    feedback = client.post(TRIAGE + "/feedback", content='{"feedback": []}', headers=headers)
    assert feedback.status_code == 415
    for path in ("/workflows/Triage/runs", f"/runs/{fx.new_id()}/resume"):
        assert client.post(path, content='{"instances": []}', headers=headers).status_code == 415
    assert _runs(database_url) == 0
    fhir_json = client.post(TRIAGE, content=raw, headers={"content-type": "application/fhir+json"})
    assert fhir_json.status_code == 200, fhir_json.text


def test_one_uuid_in_upper_and_lower_case_is_one_hook_call(
    client: TestClient, database_url: str
) -> None:
    body = triage_body()
    first = client.post(TRIAGE, json=body)
    upper = copy.deepcopy(body)
    upper["hookInstance"] = body["hookInstance"].upper()
    again = client.post(TRIAGE, json=upper)
    assert first.status_code == again.status_code == 200, again.text
    assert again.json() == first.json()
    assert _runs(database_url) == 1


@pytest.mark.parametrize("spelling", ["{%s}", "urn:uuid:%s", "%s-hex"])
def test_other_spellings_of_a_uuid_are_400_not_another_run(
    client: TestClient, database_url: str, spelling: str
) -> None:
    body = triage_body()
    assert client.post(TRIAGE, json=body).status_code == 200
    other = copy.deepcopy(body)
    hi = body["hookInstance"]
    other["hookInstance"] = hi.replace("-", "") if spelling == "%s-hex" else spelling % hi
    resp = client.post(TRIAGE, json=other)
    assert resp.status_code == 400, resp.text
    assert resp.json()["issue"][0]["expression"] == ["hookInstance"]
    assert _runs(database_url) == 1
