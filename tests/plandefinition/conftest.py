"""The service as a real process for the ``$apply`` conformance tests: SQLite, and the CPG
collection's definitions (``tests/data/cpg-pd-apply/definitions``) as the definitions it
holds."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.live_server import LiveServer, free_port, launch

CPG = Path(__file__).resolve().parents[1] / "data/cpg-pd-apply"


@pytest.fixture(scope="package")
def server(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    where = tmp_path_factory.mktemp("apply")
    database = where / "horismos.db"
    shutil.copyfile(sqlite_template, database)
    port = free_port()
    env = {
        "HORISMOS_DATABASE_URL": f"sqlite:///{database}",
        "HORISMOS_PUBLIC_BASE_URL": f"http://127.0.0.1:{port}",
        "HORISMOS_RECONCILE_INTERVAL_SECONDS": "0",
        "HORISMOS_DEFINITION_PATHS": json.dumps([str(CPG / "definitions")]),
    }
    running = launch(env, where / "server.log", port=port)
    try:
        yield running
    finally:
        running.stop()


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
