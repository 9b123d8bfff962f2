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
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

ROOT = Path(__file__).resolve().parents[1]
LUA = Path(__file__).resolve().with_name("hooks.lua")
PG_ADMIN = os.environ.get("HORISMOS_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
PLACEHOLDER = "00000000-0000-4000-8000-000000000000"
UNIQUE = "@U@"
TRIAGE = "horismos-triage"
NOOP = "no-op parse"
BASELINE = "triage @ baseline"
TICK_MS = 1000.0 / os.sysconf("SC_CLK_TCK")

# the goal lines (PostgreSQL, one worker unless said otherwise)
RATIO_GOAL = 0.25
P99_GOAL_MS = 20.0
CPU_GOAL_MS = 2.5
SCALE_GOAL = 1.4
SQLITE_P99_GOAL_MS = 100.0
EXTRA_CPU_FACTOR = 2.0


# --- the no-op comparison app -----------------------------------------------------------


def _noop_app() -> Any:
    app = FastAPI()

    @app.post("/cds-services/{service_id}")
    async def noop(service_id: str, request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        return JSONResponse({"cards": [], "hook": body.get("hook")})

    @app.get("/healthz")
    async def alive() -> dict[str, str]:
        return {"status": "ok"}

    return app


def noop_factory() -> Any:
    return _noop_app()


# --- the requests -----------------------------------------------------------------------------


TAKEN = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)


def _obs(pid: str, code: str, value: float, unit: str, minutes: int, n: int) -> dict[str, Any]:
    return {
        "resourceType": "Observation",
        "id": f"obs{n}-{UNIQUE}",
        "meta": {"versionId": "1", "lastUpdated": "2025-06-01T10:00:00Z"},
        "status": "final",
        "category": [{"coding": [{"code": "vital-signs"}]}],
        "code": {"coding": [{"system": "http://loinc.org", "code": code}]},
        "subject": {"reference": f"Patient/{pid}"},
        # taken this hour, so every reading is within the deployment's horis:maxAge
        "effectiveDateTime": (TAKEN + timedelta(minutes=minutes)).isoformat(timespec="seconds"),
        "valueQuantity": {
            "value": value,
            "unit": unit,
            "system": "http://unitsofmeasure.org",
            "code": unit,
        },
    }


def triage_request() -> dict[str, Any]:
    """The triage hook request; ``@U@`` marks each prefetched Observation's and Condition's id."""
    pid, eid = "bench-patient", "bench-encounter"
    panel = _obs(pid, "85354-9", 0, "mm[Hg]", 5, 6)
    del panel["valueQuantity"]
    panel["component"] = [
        {
            "code": {"coding": [{"system": "http://loinc.org", "code": c}]},
            "valueQuantity": {"value": v, "system": "http://unitsofmeasure.org", "code": "mm[Hg]"},
        }
        for c, v in (("8480-6", 128), ("8462-4", 82))
    ]

    def condition(code: str, n: int) -> dict[str, Any]:
        return {
            "resourceType": "Condition",
            "id": f"cond{n}-{UNIQUE}",
            "meta": {"versionId": "2"},
            "clinicalStatus": {"coding": [{"code": "active"}]},
            "category": [{"coding": [{"code": "encounter-diagnosis"}]}],
            "code": {"coding": [{"system": "http://snomed.info/sct", "code": code}]},
            "subject": {"reference": f"Patient/{pid}"},
        }

    vitals = [
        _obs(pid, "8867-4", 112, "/min", 1, 1),
        _obs(pid, "8867-4", 104, "/min", 9, 2),
        _obs(pid, "9279-1", 22, "/min", 1, 3),
        _obs(pid, "59408-5", 95, "%", 1, 4),
        _obs(pid, "8310-5", 100.6, "[degF]", 2, 5),
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
                "entry": [
                    {"resource": condition("25064002", 1)},
                    {"resource": condition("44054006", 2)},
                ],
            },
        },
    }


def template_of(request: dict[str, Any]) -> str:
    """A request file as a wrk template: the hookInstance is replaced by the placeholder and
    each prefetch Bundle entry's id gets the ``@U@`` suffix, unless something references it."""
    request = json.loads(json.dumps(request))
    request["hookInstance"] = PLACEHOLDER
    text = json.dumps(request)
    for value in (request.get("prefetch") or {}).values():
        if not isinstance(value, dict) or value.get("resourceType") != "Bundle":
            continue
        for entry in value.get("entry") or []:
            res = entry.get("resource") if isinstance(entry, dict) else None
            if not isinstance(res, dict) or not isinstance(res.get("id"), str):
                continue
            if UNIQUE in res["id"] or f"{res.get('resourceType')}/{res['id']}" in text:
                continue
            res["id"] = f"{res['id'][:40]}-{UNIQUE}"
    return json.dumps(request)


# --- processes and their CPU ------------------------------------------------------------------


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, CPU ticks of the process and its waited-for children)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    # fields[0] is field 3 (state): ppid is field 4, utime..cstime fields 14..17
    return int(fields[1]), sum(int(x) for x in fields[11:15])


def tree_ticks(root: int) -> int:
    """CPU ticks of ``root`` and every live descendant (and their reaped children)."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st is not None:
                parents[int(entry.name)], ticks[int(entry.name)] = st
    wanted = {root}
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in wanted and pid not in wanted:
                wanted.add(pid)
                grew = True
    return sum(ticks.get(pid, 0) for pid in wanted)


def pids_ticks(pids: set[int]) -> dict[int, int]:
    out: dict[int, int] = {}
    for pid in pids:
        st = _stat(pid)
        if st is not None:
            out[pid] = st[1]
    return out


def machine_ticks() -> int:
    """Busy ticks of the whole machine (every core): user, nice, system, irq, softirq, steal."""
    first = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in first[:8])
    return user + nice + system + irq + softirq + steal


# --- servers ----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Server:
    name: str
    port: int
    proc: subprocess.Popen[bytes]

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def _serve(
    name: str, app: str, env: dict[str, str], workers: int, extra: list[str], root: Path = ROOT
) -> Server:
    port = _free_port()
    cmd = [
        sys.executable, "-m", "uvicorn", app, "--factory",
        "--host", "127.0.0.1", "--port", str(port),
        "--workers", str(workers), "--log-level", "warning", "--no-access-log", *extra,
    ]  # fmt: skip
    return Server(name, port, subprocess.Popen(cmd, cwd=root, env={**env, "PYTHONPATH": str(root)}))


def _wait_ready(server: Server, timeout: float = 120.0) -> None:
    import httpx

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if server.proc.poll() is not None:
            raise RuntimeError(f"{server.name} exited with {server.proc.returncode}")
        try:
            # alive is enough: the sample call before the load proves the rest
            if httpx.get(server.url("/healthz"), timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{server.name} not ready after {timeout:.0f}s")


def _stop(servers: list[Server]) -> None:
    for s in servers:
        s.proc.terminate()
    for s in servers:
        try:
            s.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            s.proc.kill()
            s.proc.wait()


# --- one wrk run --------------------------------------------------------------------------------


@dataclass
class Slice:
    requests: int
    seconds: float
    errors: dict[str, int]
    quantiles: list[tuple[float, float]]  # (latency µs, share of the slice's requests)
    server_ms: float
    db_ms: float
    wrk_ms: float
    machine_ms: float


@dataclass
class Endpoint:
    label: str
    slices: list[Slice] = field(default_factory=list)

    def total(self, name: str) -> float:
        return float(sum(getattr(s, name) for s in self.slices))

    @property
    def requests(self) -> int:
        return sum(s.requests for s in self.slices)

    @property
    def rps(self) -> float:
        seconds = self.total("seconds")
        return self.requests / seconds if seconds else 0.0

    def percentile(self, p: float) -> float:
        """Latency in ms at ``p`` % over every slice (each slice's quantiles weighted by its
        requests)."""
        points = sorted((us, share * s.requests) for s in self.slices for us, share in s.quantiles)
        total = sum(w for _, w in points)
        if not total:
            return float("nan")
        seen = 0.0
        for us, weight in points:
            seen += weight
            if seen >= total * p / 100:
                return us / 1000
        return points[-1][0] / 1000

    def per_request(self, name: str) -> float:
        return self.total(name) / self.requests if self.requests else float("nan")

    def errors(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.slices:
            for k, v in s.errors.items():
                if v:
                    out[k] = out.get(k, 0) + v
        return out


def _parse_wrk(path: Path) -> tuple[int, float, dict[str, int], list[tuple[float, float]]]:
    requests, seconds, errors, quantiles = 0, 0.0, {}, []
    for line in path.read_text().splitlines():
        key, _, rest = line.partition(" ")
        if key == "requests":
            requests = int(rest)
        elif key == "duration_us":
            seconds = int(rest) / 1e6
        elif key == "errors":
            errors = {k: int(v) for k, v in (part.split("=") for part in rest.split())}
        elif key == "q":
            _p, share, us = rest.split()
            quantiles.append((float(us), float(share) / 100))
    return requests, seconds, errors, quantiles


def run_wrk(
    url: str,
    template: Path,
    args: argparse.Namespace,
    seconds: float,
    server: Server,
    db_pids: Any,
) -> Slice:
    """One wrk run against ``url``; the CPU each party used meanwhile."""
    with tempfile.NamedTemporaryFile("r", suffix=".wrk", delete=False) as out:
        out_path = Path(out.name)
    env = dict(os.environ, BENCH_BODY=str(template), BENCH_OUT=str(out_path))
    env["BENCH_NONCE"] = secrets.token_hex(4)
    cmd = [
        "wrk", f"-t{args.threads}", f"-c{args.connections}", f"-d{seconds:g}s",
        "--timeout", "10s", "-s", str(LUA), url,
    ]  # fmt: skip
    db_before = pids_ticks(db_pids())
    server_before, machine_before = tree_ticks(server.proc.pid), machine_ticks()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(proc.pid, 0)
    server_after, machine_after = tree_ticks(server.proc.pid), machine_ticks()
    db_after = pids_ticks(db_pids() | set(db_before))
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"wrk failed ({proc.returncode}): {proc.stderr.read().decode()[:500]}")
    requests, elapsed, errors, quantiles = _parse_wrk(out_path)
    out_path.unlink(missing_ok=True)
    db_ms = sum(db_after.get(p, 0) - db_before.get(p, 0) for p in db_after) * TICK_MS
    return Slice(
        requests=requests,
        seconds=elapsed,
        errors=errors,
        quantiles=quantiles,
        server_ms=(server_after - server_before) * TICK_MS,
        db_ms=db_ms,
        wrk_ms=(usage.ru_utime + usage.ru_stime) * 1000,
        machine_ms=(machine_after - machine_before) * TICK_MS,
    )


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
            return _serve(name, app, {**env, "HORISMOS_DATABASE_URL": db}, workers, extra, root)

        hook = served("service", "app.main:create_app")
        noop = served("no-op", "bench.hooks:noop_factory")
        servers = [hook, noop]
        if args.baseline:
            servers.append(served("baseline", "app.main:create_app", Path(args.baseline)))
        try:
            for server in servers:
                _wait_ready(server)
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
            _stop(servers)
            for f in files.values():
                f.unlink(missing_ok=True)
    return endpoints, samples


# --- the report --------------------------------------------------------------------------------


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _table(backend: str, workers: int, endpoints: dict[str, Endpoint]) -> list[str]:
    lines = [
        f"{backend} · {workers} worker(s)",
        f"  {'endpoint':<22}{'requests':>9}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'vs no-op':>9}{'server':>8}{'db':>6}{'wrk':>6}{'others':>8}  errors",
    ]
    noop_rps = endpoints[NOOP].rps
    for e in endpoints.values():
        seconds = e.total("seconds")
        own = e.total("server_ms") + e.total("db_ms") + e.total("wrk_ms")
        others = max(0.0, e.total("machine_ms") - own) / 1000 / seconds if seconds else 0.0
        lines.append(
            f"  {e.label:<22}{e.requests:>9}{e.rps:>9.1f}{e.percentile(50):>9.2f}"
            f"{e.percentile(99):>9.2f}{e.rps / noop_rps if noop_rps else 0:>9.3f}"
            f"{e.per_request('server_ms'):>8.2f}{e.per_request('db_ms'):>6.2f}"
            f"{e.per_request('wrk_ms'):>6.2f}{others:>8.2f}  {e.errors() or '-'}"
        )
    return lines


def goals(results: dict[tuple[str, int], dict[str, Endpoint]]) -> list[tuple[bool, str]]:
    checks: list[tuple[bool, str]] = []
    pg1 = results.get(("postgresql", 1))
    if pg1 is not None:
        hook, noop = pg1[TRIAGE], pg1[NOOP]
        ratio = hook.rps / noop.rps
        checks += [
            (ratio >= RATIO_GOAL, f"PG 1 worker: throughput {ratio:.1%} of no-op >= 25%"),
            (
                hook.percentile(99) <= P99_GOAL_MS,
                f"PG 1 worker: p99 {hook.percentile(99):.1f} ms <= {P99_GOAL_MS:g} ms",
            ),
            (
                hook.per_request("server_ms") <= CPU_GOAL_MS,
                f"PG 1 worker: server CPU {hook.per_request('server_ms'):.2f} ms/hook "
                f"<= {CPU_GOAL_MS:g} ms",
            ),
        ]
    pg2 = results.get(("postgresql", 2))
    if pg1 is not None and pg2 is not None:
        scale = pg2[TRIAGE].rps / pg1[TRIAGE].rps
        checks.append(
            (scale >= SCALE_GOAL, f"PG 2 workers: {scale:.2f}x one worker's throughput >= 1.4x")
        )
    for (backend, workers), endpoints in results.items():
        if backend == "sqlite" and workers == 1:
            p99 = endpoints[TRIAGE].percentile(99)
            checks.append(
                (p99 <= SQLITE_P99_GOAL_MS, f"SQLite 1 worker: p99 {p99:.1f} ms <= 100 ms")
            )
    for (backend, workers), endpoints in results.items():
        base = endpoints[TRIAGE].per_request("server_ms")
        for label, e in endpoints.items():
            if label in (NOOP, TRIAGE, BASELINE):
                continue
            cpu = e.per_request("server_ms")
            checks.append(
                (
                    cpu <= EXTRA_CPU_FACTOR * base,
                    f"{backend} {workers} worker(s): {label} CPU {cpu:.2f} ms <= 2x triage's "
                    f"{base:.2f} ms",
                )
            )
    for (backend, workers), endpoints in results.items():
        bad = {k: v for e in endpoints.values() for k, v in e.errors().items()}
        checks.append(
            (not bad, f"{backend} {workers} worker(s): every call answered 2xx ({bad or 'yes'})")
        )
    return checks


def _stack(options: str) -> str:
    """The event loop and HTTP parser uvicorn uses with ``options`` (its auto choice otherwise)."""
    import importlib.util

    words = shlex.split(options)

    def chosen(flag: str, fast: str, fallback: str) -> str:
        if flag in words and words.index(flag) + 1 < len(words):
            return words[words.index(flag) + 1]
        return fast if importlib.util.find_spec(fast) is not None else fallback

    return f"{chosen('--loop', 'uvloop', 'asyncio')}/{chosen('--http', 'httptools', 'h11')}"


def _describe(sid: str, sample: dict[str, Any]) -> str:
    decision = sample.get("decision") or {}
    what = f" ({decision.get('property')} = {decision.get('value')})" if decision else ""
    return (
        f"  {sid}: workflow {sample.get('workflow')} ends at {sample.get('terminal')}{what}, "
        f"{sample['cards']} card(s)"
    )


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
    load_before = _load()
    started = time.monotonic()
    results: dict[tuple[str, int], dict[str, Endpoint]] = {}
    samples: dict[str, dict[str, Any]] = {}
    for backend in backends:
        for workers in worker_counts:
            results[(backend, workers)], samples = measure(backend, workers, services, args)
    print(
        f"wrk -t{args.threads} -c{args.connections} · uvicorn {_stack(args.uvicorn)} · "
        f"{args.seconds:g}s per endpoint per "
        f"configuration in {args.rounds} alternating rounds · {os.cpu_count()} CPUs · "
        f"load average before {load_before}, after {_load()} · "
        f"{time.monotonic() - started:.0f}s in all"
    )
    print("each call is a fresh hookInstance with fresh resource ids; what one run does:")
    for sid, sample in samples.items():
        print(_describe(sid, sample))
    print(
        "server/db/wrk: CPU ms per request of the uvicorn processes, of PostgreSQL's backends "
        "and of wrk; others: cores that other work kept busy meanwhile"
    )
    for (backend, workers), endpoints in results.items():
        print("\n".join(_table(backend, workers, endpoints)))
    checks = goals(results)
    for ok, text in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {text}")
    print(f"overall: {'PASS' if all(ok for ok, _ in checks) else 'FAIL'}")


if __name__ == "__main__":
    main()
