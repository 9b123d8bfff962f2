"""What the effect log costs per commit: wall time and database transactions (not a test).

    .venv/bin/python -m bench.effect_log [--calls 200]

Creates a fresh PostgreSQL database on 127.0.0.1:5432 (dropped at the end), starts the Node FHIR
test server on a loopback port, and times the commit adapter's call for

- a refused write (the grant lacks the write scope: no request is sent), and
- an accepted write (a conditional PUT against the FHIR server, body hydrated: one request),

each once with one HTTP client shared by all calls (what the service does) and once with none
(the adapter builds its own), printing the median and mean wall time per call and the number of
committed database transactions per call. The accepted case includes the HTTP round trip to the
local server; the transaction count is what the effect log adds to it. Run it on an idle machine:
the absolute times move with load, the transaction counts do not.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg import sql
from sqlalchemy import Engine, event

from adapters.fhir.commit import CommitContext, FhirCommitAdapter, SourceRef
from app.store import make_engine
from app.store.migrate import upgrade
from app.tools.errors import ToolError
from tests.commit.test_commit_adapter import ONTOLOGY, TOOL, _call
from tests.support.fhir_server import SERVER_DIR, FhirServer, _free_port, _wait_ready
from tests.support.runs import claimed_run

PG = os.environ.get("HORISMOS_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
DB = f"horismos_commit_timing_{os.getpid()}"
GRANTED = "user/Encounter.read user/Encounter.write"


def _measure(
    engine: Engine, calls: int, make: Callable[[], tuple[FhirCommitAdapter, str]]
) -> tuple[float, float, float]:
    commits = 0

    def count(_conn: Any) -> None:
        nonlocal commits
        commits += 1

    times: list[float] = []
    for _ in range(calls):
        adapter, run_id = make()
        event.listen(engine, "commit", count)
        started = time.perf_counter()
        with contextlib.suppress(ToolError):
            adapter(_call(run_id))
        times.append((time.perf_counter() - started) * 1000)
        event.remove(engine, "commit", count)
    return statistics.median(times), statistics.fmean(times), commits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    calls = parser.parse_args().calls

    with psycopg.connect(PG, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DB)))
    url = PG.rsplit("/", 1)[0] + "/" + DB
    workdir = Path(tempfile.mkdtemp(prefix="horismos-timing-"))
    port = _free_port()
    node = shutil.which("node") or "node"
    with (workdir / "out.txt").open("wb") as sink:
        process = subprocess.Popen(
            [node, "server.mjs", "--port", str(port), "--log", str(workdir / "log.jsonl")],
            cwd=SERVER_DIR,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    engine = make_engine(url)
    try:
        upgrade(url)
        base = f"http://127.0.0.1:{port}/fhir"
        _wait_ready(process, base, workdir / "out.txt")
        fhir = FhirServer(base_url=base, log_path=workdir / "log.jsonl", process=process)

        shared = httpx.Client(follow_redirects=False)

        def setup(scope: str, http: httpx.Client | None) -> tuple[FhirCommitAdapter, str]:
            encounter = fhir.create(
                {"resourceType": "Encounter", "id": fhir.new_id(), "status": "in-progress"}
            )
            run_id = claimed_run(engine, "urn:timing")
            source = SourceRef(
                resource_type="Encounter",
                id=encounter["id"],
                version_id=encounter["meta"]["versionId"],
            )
            context = CommitContext(
                fhir_server=base,
                scope=scope,
                sources=(source,),
                resources={f"Encounter/{encounter['id']}": encounter},
            )
            adapter = FhirCommitAdapter(
                ontology=ONTOLOGY, engine=engine, context=context, http=http
            )
            return adapter, run_id

        assert TOOL.commits is not None
        cases = [
            (f"{name} ({'shared client' if http else 'own client'})", scope, http)
            for http in (shared, None)
            for name, scope in (("refused", "user/Encounter.read"), ("accepted", GRANTED))
        ]
        for label, scope, http in cases:
            _measure(engine, 10, lambda s=scope, h=http: setup(s, h))  # warm up
            median, mean, commits = _measure(engine, calls, lambda s=scope, h=http: setup(s, h))
            print(
                f"{label:26} median {median:7.2f} ms  mean {mean:7.2f} ms  "
                f"transactions/call {commits / calls:.1f}  ({calls} calls)"
            )
        shared.close()
        fhir.close()
    finally:
        engine.dispose()
        process.terminate()
        process.wait(timeout=10)
        with psycopg.connect(PG, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DB))
            )


if __name__ == "__main__":
    main()
