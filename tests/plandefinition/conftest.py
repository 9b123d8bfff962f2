"""The service as a real process for the ``$apply`` conformance tests: SQLite, and the CPG
collection's definitions (``tests/data/cpg-pd-apply/definitions``) as the definitions it
holds."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from tests.support.live_server import LiveServer, sqlite_live_server

CPG = Path(__file__).resolve().parents[1] / "data/cpg-pd-apply"


@pytest.fixture(scope="package")
def server(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    definitions = {"HORISMOS_DEFINITION_PATHS": json.dumps([str(CPG / "definitions")])}
    with sqlite_live_server(sqlite_template, tmp_path_factory.mktemp("apply"), definitions) as s:
        yield s


def post(server: LiveServer, path: str, body: Any) -> httpx.Response:
    return httpx.post(
        server.base + path,
        content=json.dumps(body),
        headers={"Content-Type": "application/fhir+json"},
        timeout=30,
    )


def needs_cql(case: dict[str, Any]) -> bool:
    return "text/cql" in json.dumps(case["request"])


def case(path: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(path.read_text())
    return found


def patient_view(
    client: TestClient, service: str, patient: dict[str, Any], **prefetch: Any
) -> dict[str, Any]:
    """A patient-view call to ``service`` for ``patient`` (user ``Practitioner/p1``), with
    ``prefetch`` beside the patient; its answer, which must be a 200."""
    answer = client.post(
        f"/cds-services/{service}",
        json={
            "hook": "patient-view",
            "hookInstance": str(uuid.uuid4()),
            "context": {"patientId": patient["id"], "userId": "Practitioner/p1"},
            "prefetch": {"patient": patient, **prefetch},
        },
    )
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body
