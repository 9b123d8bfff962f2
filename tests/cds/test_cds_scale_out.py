"""Scale-out: several server processes (``horismos serve`` on loopback, one of them with two
workers) on one PostgreSQL answer each hookInstance once, whichever process each twin reaches.

Real processes, real HTTP, real PostgreSQL; the writing case uses the real Node FHIR server.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, text

from tests.cds import clinical as fx
from tests.support.fhir_server import FhirServer

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]
READ_ONLY = "user/Patient.read user/Observation.read user/Condition.read user/Encounter.read"
WRITE = "user/*.read user/Encounter.write"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _serve(database_url: str, workers: int, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``horismos serve --workers N`` (as an operator runs it) on a free loopback port."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HORISMOS_")}
    env["HORISMOS_DATABASE_URL"] = database_url
    horismos = Path(sys.executable).with_name("horismos")
    cmd = [str(horismos), "serve", "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--workers", str(workers)]
    with log.open("wb") as sink:
        process = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT)
    return process, f"http://127.0.0.1:{port}"


def _wait_ready(process: subprocess.Popen[bytes], base: str, log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"server at {base} not ready:\n{log.read_text()}")


@pytest.fixture(scope="module")
def servers(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """Two server processes on the session's PostgreSQL: one with two workers, one with one."""
    folder = tmp_path_factory.mktemp("scale-out")
    started = [
        (*_serve(pg_url, workers, folder / f"server{n}.log"), folder / f"server{n}.log")
        for n, workers in enumerate((2, 1))
    ]
    try:
        for process, base, log in started:
            _wait_ready(process, base, log)
        yield [base for _, base, _ in started]
    finally:
        for process, _, _ in started:
            process.terminate()
        for process, _, _ in started:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _triage(fhir_server: str, scope: str, pid: str, eid: str, **prefetch: Any) -> dict[str, Any]:
    return fx.hook_request(
        "encounter-start",
        {"patientId": pid, "encounterId": eid},
        fhir_server=fhir_server,
        scope=scope,
        prefetch={
            "patient": fx.patient(pid),
            "encounter": fx.encounter(eid, pid),
            "vitals": fx.searchset(
                [fx.observation(pid, "8867-4", 150, "/min"), *fx.vital_signs(pid, skip={"8867-4"})]
            ),
            "conditions": fx.searchset([]),
            **prefetch,
        },
    )


def _race(servers: list[str], bodies: list[dict[str, Any]]) -> list[list[httpx.Response]]:
    """Each body sent at the same moment to every server (two connections to the one with two
    workers); returns the answers per body."""
    targets = [servers[0], servers[0], servers[1]]

    def one(body: dict[str, Any]) -> list[httpx.Response]:
        start = threading.Barrier(len(targets))
        got: list[httpx.Response] = []

        def call(base: str) -> None:
            with httpx.Client(timeout=60) as client:
                start.wait()
                got.append(client.post(f"{base}/cds-services/horismos-triage", json=body))

        threads = [threading.Thread(target=call, args=(base,)) for base in targets]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return got

    return [one(body) for body in bodies]


def test_twins_across_processes_are_answered_once_when_nothing_is_sent(
    servers: list[str], pg_engine: Engine
) -> None:
    bodies = [
        _triage("http://127.0.0.1:9/fhir", READ_ONLY, fx.new_id(), fx.new_id()) for _ in range(8)
    ]
    answers = _race(servers, bodies)

    for got in answers:
        assert [r.status_code for r in got] == [200, 200, 200], [r.text[:300] for r in got]
        assert got[0].json() == got[1].json() == got[2].json()
    with pg_engine.connect() as connection:
        runs = connection.execute(text("SELECT hook_instance, status FROM runs")).all()
        effects = connection.execute(text("SELECT state FROM effects")).scalars().all()
    assert sorted(tuple(r) for r in runs) == sorted(
        (b["hookInstance"], "completed") for b in bodies
    )
    assert effects == ["refused"] * len(bodies)


@pytest.mark.fhirserver
def test_twins_across_processes_send_one_write(
    servers: list[str], pg_engine: Engine, fhir_server: FhirServer
) -> None:
    bodies, encounters = [], []
    for _ in range(4):
        pid = fhir_server.new_id()
        patient = fhir_server.create({"resourceType": "Patient", "id": pid})
        encounter = fhir_server.create(
            {
                "resourceType": "Encounter",
                "id": fhir_server.new_id(),
                "status": "in-progress",
                "class": {"code": "EMER"},
                "subject": {"reference": f"Patient/{pid}"},
            }
        )
        encounters.append(encounter["id"])
        bodies.append(
            _triage(
                fhir_server.base_url,
                WRITE,
                pid,
                encounter["id"],
                patient=patient,
                encounter=encounter,
            )
        )
    mark = fhir_server.mark()

    answers = _race(servers, bodies)

    for got in answers:
        assert [r.status_code for r in got] == [200, 200, 200], [r.text[:300] for r in got]
        assert got[0].json() == got[1].json() == got[2].json()
    writes = [r for r in fhir_server.requests(since=mark) if r["method"] != "GET"]
    assert [w["method"] for w in writes] == ["PATCH"] * len(bodies)
    for eid in encounters:
        assert len(fhir_server.history("Encounter", eid)) == 2
    with pg_engine.connect() as connection:
        states = connection.execute(text("SELECT state FROM effects")).scalars().all()
        runs = connection.execute(text("SELECT count(*) FROM runs")).scalar_one()
    assert states == ["accepted"] * len(bodies)
    assert runs == len(bodies)
