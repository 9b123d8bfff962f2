"""What one hook call costs against a no-op endpoint, measured with wrk (not a test).

    make bench                       # installs wrk (Debian) when it is missing, then runs this
    .venv/bin/python bench/hooks.py [--backends postgresql,sqlite] [--workers 1,2]
        [--connections 10] [--threads 2] [--seconds 10] [--rounds 2]
        [--service ID=REQUEST.json ...]

For each database backend (a fresh PostgreSQL database on 127.0.0.1:5432, dropped at the end; a
fresh SQLite file in a temporary folder) and each uvicorn worker count, it starts two servers
with the same uvicorn options: the service (``app.main:create_app``) and a no-op FastAPI app
whose one endpoint reads and ``json.loads`` the same body and answers ``{"cards": []}``. wrk
(a native load generator: a Python one saturates before the servers do) keeps ``--connections``
requests in flight on keep-alive loopback connections. The endpoints take turns in ``--rounds``
slices (no-op, triage, extra services, no-op, …) so load that other work puts on the machine
hits each alike; each server is warmed up first.

Every request carries a fresh ``hookInstance`` and fresh ids for the resources of the prefetch
Bundles (``bench/hooks.lua``), so each one is a new run: claimed, decided and committed before
its answer. The triage request is realistic (Patient, Encounter, six vital-sign Observations
including a blood-pressure panel, two Conditions); the EHR grants read scopes only, so the
Route step's write is refused before any network call and recorded in the effect log: the
whole path (validation, hydration, rules, workflow, effect log, persistence, cards) without a
FHIR server. One call per service before the load must answer 200; the output says which path
its run took.

``--service ID=FILE`` adds another deployment's hook (a CDS Hooks request JSON for service
``ID``; its Bundle entries get fresh ids unless another resource references them).

Per endpoint it prints requests, req/s, p50 and p99 (merged over the slices), the CPU the
server's processes used per request (``/proc``: the uvicorn process and every descendant),
the CPU PostgreSQL's backends for the bench database used per request, wrk's own, and what
the rest of the machine used meanwhile (other work: it makes latency noisy). Then PASS/FAIL
for each goal line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shlex
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# run as a script, the folder on the path is bench/, not the checkout its siblings import from
sys.path.insert(0, str(ROOT))

from bench.hooks_report import (  # noqa: E402
    BASELINE,
    NOOP,
    TRIAGE,
    describe,
    goals,
    load_average,
    table,
    uvicorn_stack,
)
from bench.hooks_requests import PLACEHOLDER, UNIQUE, template_of, triage_request  # noqa: E402
from bench.hooks_servers import Server, serve, stop, wait_ready  # noqa: E402
from bench.hooks_wrk import Endpoint, run_wrk  # noqa: E402

PG_ADMIN = os.environ.get("HORISMOS_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")

# --- databases ----------------------------------------------------------------------------------


@contextmanager
def database(backend: str) -> Iterator[tuple[str, Any]]:
    """A fresh, migrated database: (its URL, a function naming the pids of the PostgreSQL
    backends serving one application name on it)."""
    sys.path.insert(0, str(ROOT))
    from app.store.migrate import upgrade

    if backend == "sqlite":
        folder = Path(tempfile.mkdtemp(prefix="horismos-bench-"))
        url = f"sqlite:///{folder / 'bench.db'}"
        try:
            upgrade(url)
            yield url, lambda _name: set()
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return

    import psycopg
    from psycopg import sql

    name = f"horismos_hooks_bench_{os.getpid()}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        url = PG_ADMIN.rsplit("/", 1)[0] + "/" + name
        upgrade(url)
        with psycopg.connect(PG_ADMIN, autocommit=True) as watcher:

            def backends(application: str) -> set[int]:
                rows = watcher.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = %s AND application_name = %s",
                    (name, application),
                ).fetchall()
                return {int(r[0]) for r in rows}

            yield url, backends
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


# --- one configuration: a backend and a worker count -------------------------------------------


def _sample(server: Server, service: str, template: str) -> dict[str, Any]:
    """One call before the load: it must answer 200; says which path the run took."""
    import httpx

    body = template.replace(PLACEHOLDER, str(uuid.uuid4())).replace(UNIQUE, secrets.token_hex(4))
    resp = httpx.post(
        server.url(f"/cds-services/{service}"),
        content=body,
        headers={"content-type": "application/json"},
        timeout=60.0,
    )
    if resp.status_code != 200:
        raise RuntimeError(f"{service} answered {resp.status_code}: {resp.text[:500]}")
    run: dict[str, Any] = dict(resp.json()["extension"]["dev.horismos.run"])
    run["cards"] = len(resp.json()["cards"])
    return run


def measure(
    backend: str, workers: int, services: dict[str, str], args: argparse.Namespace
) -> tuple[dict[str, Endpoint], dict[str, dict[str, Any]]]:
    files = {
        sid: Path(tempfile.mkstemp(prefix=f"bench-{sid}-", suffix=".json")[1]) for sid in services
    }
    for sid, text in services.items():
        files[sid].write_text(text)
    with database(backend) as (url, db_pids):
        env = {k: v for k, v in os.environ.items() if not k.startswith("HORISMOS_")}
        extra = shlex.split(args.uvicorn)

        def served(name: str, app: str, root: Path = ROOT) -> Server:
            db = url if backend == "sqlite" else f"{url}?application_name=bench-{name}"
            return serve(name, app, {**env, "HORISMOS_DATABASE_URL": db}, workers, extra, root)

        hook = served("service", "app.main:create_app")
        noop = served("no-op", "bench.hooks_noop:noop_factory")
        servers = [hook, noop]
        if args.baseline:
            servers.append(served("baseline", "app.main:create_app", Path(args.baseline)))
        try:
            for server in servers:
                wait_ready(server)
            samples = {sid: _sample(hook, sid, text) for sid, text in services.items()}
            order = [(NOOP, noop, TRIAGE), *((sid, hook, sid) for sid in services)]
            if args.baseline:
                samples[BASELINE] = _sample(servers[2], TRIAGE, services[TRIAGE])
                order.append((BASELINE, servers[2], TRIAGE))
            for _label, server, sid in order:  # warm-up, not measured
                run_wrk(server.url(f"/cds-services/{sid}"), files[sid], args, 2, server, set)
            endpoints = {label: Endpoint(label) for label, _, _ in order}
            for _round in range(args.rounds):
                for label, server, sid in order:
                    endpoints[label].slices.append(
                        run_wrk(
                            server.url(f"/cds-services/{sid}"),
                            files[sid],
                            args,
                            args.seconds / args.rounds,
                            server,
                            lambda server=server: db_pids(f"bench-{server.name}"),
                        )
                    )
        finally:
            stop(servers)
            for f in files.values():
                f.unlink(missing_ok=True)
    return endpoints, samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="postgresql,sqlite", help="comma-separated")
    parser.add_argument("--workers", default="1,2", help="uvicorn worker counts, comma-separated")
    parser.add_argument("--connections", type=int, default=10, help="requests in flight")
    parser.add_argument("--threads", type=int, default=2, help="wrk threads")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured s per endpoint")
    parser.add_argument("--rounds", type=int, default=2, help="alternations sharing --seconds")
    parser.add_argument(
        "--uvicorn",
        default="",
        metavar="OPTIONS",
        help='more uvicorn options for both servers, e.g. "--loop asyncio --http h11"',
    )
    parser.add_argument(
        "--baseline",
        metavar="CHECKOUT",
        help="also serve the triage hook from another checkout (an older tree) in the same run",
    )
    parser.add_argument(
        "--service",
        action="append",
        default=[],
        metavar="ID=FILE",
        help="another hook to measure: its service id and a CDS Hooks request JSON for it",
    )
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit(
            "bench/hooks.py needs wrk, a native HTTP load generator: `make bench` installs it, "
            "or run `apt-get install -y wrk` (Debian/Ubuntu)."
        )
    services = {TRIAGE: template_of(triage_request())}
    for spec in args.service:
        sid, sep, path = spec.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z0-9._-]+", sid):
            sys.exit(f"--service wants ID=FILE, got {spec!r}")
        services[sid] = template_of(json.loads(Path(path).read_text()))
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    worker_counts = [int(w) for w in args.workers.split(",")]
    load_before = load_average()
    started = time.monotonic()
    results: dict[tuple[str, int], dict[str, Endpoint]] = {}
    samples: dict[str, dict[str, Any]] = {}
    for backend in backends:
        for workers in worker_counts:
            results[(backend, workers)], samples = measure(backend, workers, services, args)
    print(
        f"wrk -t{args.threads} -c{args.connections} · uvicorn {uvicorn_stack(args.uvicorn)} · "
        f"{args.seconds:g}s per endpoint per "
        f"configuration in {args.rounds} alternating rounds · {os.cpu_count()} CPUs · "
        f"load average before {load_before}, after {load_average()} · "
        f"{time.monotonic() - started:.0f}s in all"
    )
    print("each call is a fresh hookInstance with fresh resource ids; what one run does:")
    for sid, sample in samples.items():
        print(describe(sid, sample))
    print(
        "server/db/wrk: CPU ms per request of the uvicorn processes, of PostgreSQL's backends "
        "and of wrk; others: cores that other work kept busy meanwhile"
    )
    for (backend, workers), endpoints in results.items():
        print("\n".join(table(backend, workers, endpoints)))
    checks = goals(results)
    for ok, text in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {text}")
    print(f"overall: {'PASS' if all(ok for ok, _ in checks) else 'FAIL'}")


if __name__ == "__main__":
    main()
