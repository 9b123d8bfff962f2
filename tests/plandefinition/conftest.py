"""The service as a real process for the ``$apply`` conformance tests: SQLite, and the CPG
collection's definitions (``tests/data/cpg-pd-apply/definitions``) as the definitions it
holds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

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
