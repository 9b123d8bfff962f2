"""One error format per kind of route: an RFC 9457 problem (``application/problem+json``)
everywhere but the CDS Hooks routes, which answer with a FHIR OperationOutcome."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from http import HTTPStatus
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings

PROBLEM = "application/problem+json"


@pytest.fixture
def client(sqlite_template: Path, tmp_path: Path) -> Iterator[TestClient]:
    path = tmp_path / "horismos.db"
    shutil.copyfile(sqlite_template, path)
    with TestClient(create_app(Settings(database_url=f"sqlite:///{path}"))) as test_client:
        yield test_client


def _problem(answer: httpx.Response, status: int) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == PROBLEM
    body: dict[str, Any] = answer.json()
    assert body["type"] == "about:blank"
    assert body["status"] == status
    assert body["title"] and body["detail"]
    return body


def test_an_unknown_run_is_a_problem_naming_the_run(client: TestClient) -> None:
    body = _problem(client.get("/runs/0123456789abcdef0123456789abcdef"), 404)
    assert body["title"] == "Not Found"
    assert body["code"] == "not-found" and body["field"] == "run"
    assert "0123456789abcdef0123456789abcdef" in body["detail"]


def test_a_malformed_body_is_a_problem_naming_each_field(client: TestClient) -> None:
    answer = client.post("/workflows/Triage/runs", json={"instances": "none", "colour": "red"})
    body = _problem(answer, 422)
    assert body["title"] == HTTPStatus.UNPROCESSABLE_ENTITY.phrase
    fields = {e["field"]: e["detail"] for e in body["errors"]}
    assert set(fields) == {"body.instances", "body.colour"}
    assert body["field"] in fields
    assert body["field"] in body["detail"]


def test_input_the_gate_rejects_is_a_problem_with_its_violations(client: TestClient) -> None:
    answer = client.post(
        "/workflows/Triage/runs",
        json={"instances": [{"id": "p1", "class": "Patient", "heartRate": "fast"}]},
    )
    body = _problem(answer, 400)
    assert body["field"] == "instances"
    assert body["violations"] and all("code" in v for v in body["violations"])


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("GET", "/no-such-route", 404), ("DELETE", "/healthz", 405)],
)
def test_routing_errors_are_problems(
    client: TestClient, method: str, path: str, status: int
) -> None:
    body = _problem(client.request(method, path), status)
    assert path in body["detail"]


def test_the_cds_routes_keep_answering_operation_outcomes(client: TestClient) -> None:
    answer = client.post("/cds-services/no-such-service", json={})
    assert answer.status_code == 404
    assert answer.headers["content-type"] == "application/json"
    outcome = answer.json()
    assert outcome["resourceType"] == "OperationOutcome"
    assert outcome["issue"][0]["code"] == "not-found"
    missing = client.get("/cds-services/no-such-service/feedback")
    assert missing.status_code == 405
    assert missing.json()["resourceType"] == "OperationOutcome"


def test_the_openapi_document_describes_each_error_in_its_routes_format(
    client: TestClient,
) -> None:
    document = client.get("/openapi.json").json()
    problem = {"schema": {"$ref": "#/components/schemas/Problem"}}
    outcome = {"schema": {"$ref": "#/components/schemas/OperationOutcome"}}
    runs = document["paths"]["/workflows/{workflow}/runs"]["post"]["responses"]
    assert runs["422"]["content"] == {PROBLEM: problem}
    assert runs["401"]["content"] == {PROBLEM: problem}
    record = document["paths"]["/runs/{run_id}"]["get"]["responses"]["404"]["content"]
    assert record == {PROBLEM: problem, "text/html": {"schema": {"type": "string"}}}
    hook = document["paths"]["/cds-services/{service_id}"]["post"]["responses"]
    assert hook["422"]["content"] == {"application/json": outcome}
    assert hook["404"]["content"] == {"application/json": outcome}
    assert "HTTPValidationError" not in document["components"]["schemas"]
