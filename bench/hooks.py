"""Hook latency and throughput: ``POST /cds-services/horismos-triage`` against a no-op endpoint.

    .venv/bin/python bench/hooks.py [--concurrency 10] [--seconds 15] [--workers 2]
                                    [--rounds 3] [--max-requests 20000]

Starts the service (uvicorn, PostgreSQL on 127.0.0.1:5432 in a fresh database that is dropped
at the end) and a no-op FastAPI app whose one endpoint parses the same JSON body and answers
``{"cards": []}``. A load generator in a separate process keeps ``--concurrency`` requests in
flight over loopback for ``--seconds`` (or ``--max-requests``, whichever comes first) against
each, the two endpoints taking turns in ``--rounds`` slices so that drifting background load on
the machine hits both alike. Every hook call has a fresh hookInstance and a realistic prefetch
(Patient, Encounter, six vital-sign Observations including a blood-pressure panel, two
Conditions). Both servers run
with the same number of uvicorn workers (default 2: one per core of a 2-core box, as an operator
would run it). Prints p50/p99 latency and requests/s for both, the throughput ratio, and
PASS/FAIL against the targets (hook p99 <= 50 ms, hook throughput >= 25% of the no-op's).

The EHR in this request grants read scopes only, so the Route step's commit is refused before
any network call (recorded as an effect): the full path of validation, hydration, rules,
workflow, effect log, persistence and cards, without a FHIR server. Every hook call's run,
trace, proof and source versions are committed before its answer, as in production.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

ROOT = Path(__file__).resolve().parents[1]
PG_ADMIN = os.environ.get("HORISMOS_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
PLACEHOLDER = "00000000-0000-4000-8000-000000000000"
P99_TARGET_MS = 50.0
RATIO_TARGET = 0.25


# --- the no-op comparison app -----------------------------------------------------------


def _noop_app() -> Any:
    app = FastAPI()

    @app.post("/cds-services/{service_id}")
    async def noop(service_id: str, request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        return JSONResponse({"cards": [], "hook": body.get("hook")})

    return app


def noop_factory() -> Any:
    return _noop_app()


# --- the request ----------------------------------------------------------------------------


def _obs(pid: str, code: str, value: float, unit: str, minutes: int) -> dict[str, Any]:
    return {
        "resourceType": "Observation",
        "id": uuid.uuid4().hex[:16],
        "meta": {"versionId": "1", "lastUpdated": "2025-06-01T10:00:00Z"},
        "status": "final",
        "category": [{"coding": [{"code": "vital-signs"}]}],
        "code": {"coding": [{"system": "http://loinc.org", "code": code}]},
        "subject": {"reference": f"Patient/{pid}"},
        "effectiveDateTime": f"2025-06-01T10:{minutes:02d}:00Z",
        "valueQuantity": {
            "value": value,
            "unit": unit,
            "system": "http://unitsofmeasure.org",
            "code": unit,
        },
    }


def triage_request() -> dict[str, Any]:
    pid, eid = "bench-patient", "bench-encounter"
    panel = _obs(pid, "85354-9", 0, "mm[Hg]", 5)
    del panel["valueQuantity"]
    panel["component"] = [
        {
            "code": {"coding": [{"system": "http://loinc.org", "code": c}]},
            "valueQuantity": {"value": v, "system": "http://unitsofmeasure.org", "code": "mm[Hg]"},
        }
        for c, v in (("8480-6", 128), ("8462-4", 82))
    ]

    def condition(code: str) -> dict[str, Any]:
        return {
            "resourceType": "Condition",
            "id": uuid.uuid4().hex[:16],
            "meta": {"versionId": "2"},
            "clinicalStatus": {"coding": [{"code": "active"}]},
            "category": [{"coding": [{"code": "encounter-diagnosis"}]}],
            "code": {"coding": [{"system": "http://snomed.info/sct", "code": code}]},
            "subject": {"reference": f"Patient/{pid}"},
        }

    vitals = [
        _obs(pid, "8867-4", 112, "/min", 1),
        _obs(pid, "8867-4", 104, "/min", 9),
        _obs(pid, "9279-1", 22, "/min", 1),
        _obs(pid, "59408-5", 95, "%", 1),
        _obs(pid, "8310-5", 100.6, "[degF]", 2),
        panel,
    ]
    return {
        "hook": "encounter-start",
        "hookInstance": PLACEHOLDER,
        "fhirServer": "http://127.0.0.1:9/fhir",
        "fhirAuthorization": {
            "access_token": "bench-token",
            "token_type": "Bearer",
            "expires_in": 300,
            "scope": "user/Patient.read user/Observation.read user/Condition.read",
            "subject": "horismos-bench",
        },
        "context": {"userId": "Practitioner/bench", "patientId": pid, "encounterId": eid},
        "prefetch": {
            "patient": {
                "resourceType": "Patient",
                "id": pid,
                "meta": {"versionId": "4"},
                "birthDate": "1956-02-11",
                "gender": "female",
            },
            "encounter": {
                "resourceType": "Encounter",
                "id": eid,
                "meta": {"versionId": "1"},
                "status": "in-progress",
                "class": {"code": "EMER"},
                "subject": {"reference": f"Patient/{pid}"},
            },
            "vitals": {
                "resourceType": "Bundle",
                "type": "searchset",
                "entry": [{"resource": r} for r in vitals],
            },
            "conditions": {
                "resourceType": "Bundle",
                "type": "searchset",
                "entry": [{"resource": condition("25064002")}, {"resource": condition("44054006")}],
            },
        },
    }


# --- the load generator (runs in its own process) ------------------------------------------


async def _drive(
    url: str, template: str, concurrency: int, seconds: float, max_requests: int
) -> dict[str, Any]:
    import httpx

    latencies: list[float] = []
    statuses: dict[int, int] = {}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=30.0) as client:

        async def one() -> None:
            body = template.replace(PLACEHOLDER, str(uuid.uuid4()))
            start = time.perf_counter()
            resp = await client.post(
                url, content=body, headers={"content-type": "application/json"}
            )
            latencies.append(time.perf_counter() - start)
            statuses[resp.status_code] = statuses.get(resp.status_code, 0) + 1

        for _ in range(concurrency * 3):  # warm-up, not measured
            await one()
        latencies.clear()
        statuses.clear()
        deadline = time.perf_counter() + seconds
        started = 0

        async def worker() -> None:
            nonlocal started
            while time.perf_counter() < deadline and started < max_requests:
                started += 1
                await one()

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - began
    return {"latencies": latencies, "elapsed": elapsed, "statuses": statuses}


def _summary(slices: list[dict[str, Any]]) -> dict[str, Any]:
    """Latency percentiles and throughput over every measured slice of one endpoint."""
    ordered = sorted(x for s in slices for x in s["latencies"])
    statuses: dict[str, int] = {}
    for s in slices:
        for code, n in s["statuses"].items():
            statuses[str(code)] = statuses.get(str(code), 0) + n
    return {
        "n": len(ordered),
        "rps": len(ordered) / sum(s["elapsed"] for s in slices),
        "p50": statistics.median(ordered) * 1000,
        "p99": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
        "statuses": statuses,
    }


def _load_main(args: argparse.Namespace) -> None:
    template = Path(args.body).read_text()
    result = asyncio.run(
        _drive(args.url, template, args.concurrency, args.seconds, args.max_requests)
    )
    print(json.dumps(result))


# --- orchestration --------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait(url: str, proc: subprocess.Popen[bytes], timeout: float = 90.0) -> None:
    import httpx

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} not ready after {timeout:.0f}s")


def _serve(app: str, port: int, env: dict[str, str], workers: int) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable, "-m", "uvicorn", app, "--factory",
        "--host", "127.0.0.1", "--port", str(port),
        "--workers", str(workers), "--log-level", "warning", "--no-access-log",
    ]  # fmt: skip
    return subprocess.Popen(cmd, cwd=ROOT, env=env)


def _load(url: str, body: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One slice of load from a fresh load-generator process."""
    seconds = args.seconds / args.rounds
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "load", "--url", url, "--body", str(body),
         "--concurrency", str(args.concurrency), "--seconds", str(seconds),
         "--max-requests", str(max(1, args.max_requests // args.rounds))],
        cwd=ROOT, check=True, capture_output=True, text=True, timeout=seconds + 300,
    )  # fmt: skip
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _main(args: argparse.Namespace) -> None:
    import psycopg
    from psycopg import sql

    sys.path.insert(0, str(ROOT))
    from app.store.migrate import upgrade

    name = f"horismos_cds_bench_{os.getpid()}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    db_url = PG_ADMIN.rsplit("/", 1)[0] + "/" + name
    procs: list[subprocess.Popen[bytes]] = []
    try:
        upgrade(db_url)
        env = {k: v for k, v in os.environ.items() if not k.startswith("HORISMOS_")}
        env.update(HORISMOS_DATABASE_URL=db_url, PYTHONPATH=str(ROOT))
        hook_port, noop_port = _free_port(), _free_port()
        procs.append(_serve("app.main:create_app", hook_port, env, args.workers))
        procs.append(_serve("bench.hooks:noop_factory", noop_port, env, args.workers))
        _wait(f"http://127.0.0.1:{hook_port}/readyz", procs[0])
        _wait(f"http://127.0.0.1:{noop_port}/docs", procs[1])
        body = Path(os.environ.get("TMPDIR", "/tmp")) / f"{name}.json"
        body.write_text(json.dumps(triage_request()))
        path = "/cds-services/horismos-triage"
        sample = _sample(f"http://127.0.0.1:{hook_port}{path}", body)
        # the endpoints take turns so that a change in the machine's other load hits both alike
        slices: dict[str, list[dict[str, Any]]] = {"no-op parse": [], "horismos-triage": []}
        for _round in range(args.rounds):
            slices["no-op parse"].append(_load(f"http://127.0.0.1:{noop_port}{path}", body, args))
            slices["horismos-triage"].append(
                _load(f"http://127.0.0.1:{hook_port}{path}", body, args)
            )
        results = {label: _summary(parts) for label, parts in slices.items()}
        body.unlink(missing_ok=True)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
    _report(args, path, sample, results)


def _sample(url: str, body: Path) -> dict[str, Any]:
    """One hook call before the load: it must answer 200, and says which path the run took."""
    import httpx

    resp = httpx.post(
        url,
        content=body.read_text().replace(PLACEHOLDER, str(uuid.uuid4())),
        headers={"content-type": "application/json"},
        timeout=60.0,
    )
    if resp.status_code != 200:
        raise RuntimeError(f"the hook answered {resp.status_code}: {resp.text[:500]}")
    run: dict[str, Any] = resp.json()["extension"]["dev.horismos.run"]
    run["cards"] = len(resp.json()["cards"])
    return run


def _report(
    args: argparse.Namespace,
    path: str,
    sample: dict[str, Any],
    results: dict[str, dict[str, Any]],
) -> None:
    print(
        f"POST {path} · concurrency {args.concurrency} · {args.seconds:g}s per endpoint in "
        f"{args.rounds} alternating rounds (at most {args.max_requests} requests) · uvicorn "
        f"workers {args.workers} (both servers) · PostgreSQL · {os.cpu_count()} CPUs"
    )
    decision = sample.get("decision") or {}
    print(
        f"each hook call: workflow {sample.get('workflow')} ends at {sample.get('terminal')} "
        f"({decision.get('property')} = {decision.get('value')}), {sample['cards']} card(s), "
        "run/trace/proof/sources committed before the answer"
    )
    print(f"{'endpoint':<18}{'requests':>10}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}  statuses")
    for label, r in results.items():
        print(
            f"{label:<18}{r['n']:>10}{r['rps']:>10.1f}{r['p50']:>10.2f}{r['p99']:>10.2f}  "
            f"{r['statuses']}"
        )
    hook, noop = results["horismos-triage"], results["no-op parse"]
    ratio = hook["rps"] / noop["rps"]
    errors = {code: n for code, n in hook["statuses"].items() if code != "200"}
    checks = [
        (f"hook p99 {hook['p99']:.1f} ms <= {P99_TARGET_MS:g} ms", hook["p99"] <= P99_TARGET_MS),
        (
            f"throughput ratio hook/no-op {ratio:.1%} >= {RATIO_TARGET:.0%}",
            ratio >= RATIO_TARGET,
        ),
        (f"every hook call answered 200 (others: {errors or 'none'})", not errors),
    ]
    for text, ok in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {text}")
    print(f"overall: {'PASS' if all(ok for _, ok in checks) else 'FAIL'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    load = sub.add_parser("load", help="(internal) the load generator process")
    load.add_argument("--url", required=True)
    load.add_argument("--body", required=True)
    load.add_argument("--concurrency", type=int, default=10)
    load.add_argument("--seconds", type=float, default=15.0)
    load.add_argument("--max-requests", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=10, help="requests in flight")
    parser.add_argument("--seconds", type=float, default=15.0, help="measured time per endpoint")
    parser.add_argument(
        "--max-requests", type=int, default=20_000, help="measured requests per endpoint, at most"
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="alternations no-op/hook sharing --seconds"
    )
    parser.add_argument(
        "--workers", type=int, default=2, help="uvicorn workers of both servers (one per core)"
    )
    args = parser.parse_args()
    if args.command == "load":
        _load_main(args)
    else:
        _main(args)


if __name__ == "__main__":
    main()
