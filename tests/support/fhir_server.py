"""The ``fhir_server`` fixture: the repository's Node FHIR test server on a loopback port.

One server per test session (``fhir-server/server.mjs``: Medplum's in-memory FHIR router). It
keeps versions, answers a stale ``If-Match: W/"<versionId>"`` with 412, serves ``_history`` and
``_include`` on searches, and can store a record as of a past ``meta.lastUpdated``
(``store_as_of``).
Every request it receives is a JSON line in its request log, which tests read to prove what
reached the server (``requests()``, ``mark()``).

Install once with ``make fhir-server/node_modules`` (``npm ci`` in ``fhir-server/``). Without it
the fixture skips locally and fails under ``CI=true``. Tests that use it carry the
``fhirserver`` marker. Resources are shared by the whole session: create your own ids
(``new_id()``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVER_DIR = ROOT / "fhir-server"
INSTALL_HINT = "make fhir-server/node_modules (or: cd fhir-server && npm ci --no-audit --no-fund)"
READY_DEADLINE_SECONDS = 60.0
FHIR_JSON = "application/fhir+json"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class FhirServer:
    """A running test FHIR server: its base URL, resource helpers and request log."""

    base_url: str
    log_path: Path
    process: subprocess.Popen[bytes]
    _client: httpx.Client = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._client = httpx.Client(
            base_url=self.base_url + "/",
            headers={"accept": FHIR_JSON},
            timeout=10.0,
        )

    @staticmethod
    def new_id() -> str:
        """A fresh resource id, so tests sharing the session server never collide."""
        return uuid.uuid4().hex[:16]

    def create(self, resource: dict[str, Any]) -> dict[str, Any]:
        """Store ``resource`` (PUT when it has an id, POST otherwise); returns it as stored."""
        kind = resource["resourceType"]
        if "id" in resource:
            response = self._client.put(f"{kind}/{resource['id']}", json=resource)
        else:
            response = self._client.post(kind, json=resource)
        response.raise_for_status()
        stored: dict[str, Any] = response.json()
        return stored

    def store_as_of(self, resource: dict[str, Any]) -> dict[str, Any]:
        """Store ``resource`` keeping its own ``meta.lastUpdated`` (the server otherwise stamps
        the time of the write): a record as it was last changed in the past."""
        response = self._client.put(
            f"{resource['resourceType']}/{resource['id']}",
            json=resource,
            headers={"x-test-keep-last-updated": "true"},
        )
        response.raise_for_status()
        stored: dict[str, Any] = response.json()
        return stored

    def update(self, resource: dict[str, Any], *, if_match: str | None = None) -> httpx.Response:
        """PUT ``resource``; ``if_match`` is a bare versionId sent as ``W/"<versionId>"``."""
        headers = {"if-match": f'W/"{if_match}"'} if if_match else {}
        return self._client.put(
            f"{resource['resourceType']}/{resource['id']}", json=resource, headers=headers
        )

    def read(self, resource_type: str, resource_id: str) -> dict[str, Any]:
        response = self._client.get(f"{resource_type}/{resource_id}")
        response.raise_for_status()
        found: dict[str, Any] = response.json()
        return found

    def history(self, resource_type: str, resource_id: str) -> list[dict[str, Any]]:
        """Every version of a resource, oldest first."""
        response = self._client.get(f"{resource_type}/{resource_id}/_history")
        response.raise_for_status()
        entries = response.json().get("entry", [])
        versions = [entry["resource"] for entry in entries]
        return sorted(versions, key=lambda r: str(r["meta"]["lastUpdated"]))

    def _log_lines(self) -> list[bytes]:
        if not self.log_path.exists():
            return []
        return [line for line in self.log_path.read_bytes().splitlines() if line.strip()]

    def requests(self, since: int = 0) -> list[dict[str, Any]]:
        """The logged requests (method, url, ifMatch, authorization, status), oldest first."""
        return [json.loads(line) for line in self._log_lines()[since:]]

    def mark(self) -> int:
        """A position in the request log; ``requests(since=mark)`` is what came after it (the
        lines are counted, not parsed: the log grows with the session)."""
        return len(self._log_lines())

    def close(self) -> None:
        self._client.close()


def _missing(reason: str) -> None:
    if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
        pytest.fail(f"{reason}; run: {INSTALL_HINT}")
    pytest.skip(f"{reason}; run: {INSTALL_HINT}")


def _wait_ready(process: subprocess.Popen[bytes], base_url: str, output: Path) -> None:
    """Poll the metadata endpoint until it answers; fail if the process exits first."""
    attempts = int(READY_DEADLINE_SECONDS / 0.05)
    with httpx.Client(timeout=1.0) as client:
        for _ in range(attempts):
            try:
                if client.get(f"{base_url}/metadata").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            try:
                process.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                continue
            raise RuntimeError(
                f"FHIR test server exited with {process.returncode}:\n{output.read_text()}"
            )
    process.kill()
    raise RuntimeError(f"FHIR test server not ready at {base_url}:\n{output.read_text()}")


@pytest.fixture(scope="session")
def fhir_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FhirServer]:
    """Start the Node FHIR server for the session and stop it at the end."""
    node = shutil.which("node")
    if node is None:
        _missing("node is not installed")
    if not (SERVER_DIR / "node_modules" / "@medplum" / "fhir-router").is_dir():
        _missing("fhir-server/node_modules is missing")
    assert node is not None
    workdir = tmp_path_factory.mktemp("fhir-server")
    log_path = workdir / "requests.jsonl"
    output = workdir / "stdout.txt"
    port = _free_port()
    with output.open("wb") as sink:
        process = subprocess.Popen(
            [node, "server.mjs", "--port", str(port), "--log", str(log_path)],
            cwd=SERVER_DIR,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    base_url = f"http://127.0.0.1:{port}/fhir"
    try:
        _wait_ready(process, base_url, output)
        server = FhirServer(base_url=base_url, log_path=log_path, process=process)
        try:
            yield server
        finally:
            server.close()
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
