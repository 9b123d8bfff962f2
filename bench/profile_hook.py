"""Where a hook call's CPU goes, part by part, in-process (not a test).

    .venv/bin/python bench/profile_hook.py [--backend postgresql|sqlite] [--calls 300]
        [--service ID=REQUEST.json]

Builds the app in-process on a fresh database (PostgreSQL on 127.0.0.1:5432, dropped at the
end; or a temporary SQLite file), sends the triage request of ``bench/hooks.py`` through the
ASGI app (no sockets, no uvicorn) — or, with ``--service``, that service's request file (the
format ``bench/hooks.py --service`` takes) — one call at a time with a fresh hookInstance and fresh
resource ids, and times named parts of the path with the process's CPU clock (every thread;
the database server's own CPU is not in it). Parts nest: "the call" includes everything.

The figures are inclusive CPU ms per call, averaged over ``--calls`` calls after a warm-up.
They move little with the machine's other load (CPU time, not wall time), so they are what
to compare before and after a change. For a statistical profile of a live server under load
use py-spy (``py-spy record --gil -f raw --pid <uvicorn pid>``).

``--cprofile FILE`` writes a deterministic profile of the measured calls (``pstats``; the parts'
timers off, worker-thread stages run inline so one profiler sees them) and prints the functions
that spent the most CPU themselves.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import secrets
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.hooks_requests import PLACEHOLDER, UNIQUE, template_of, triage_request  # noqa: E402

#: (label, module, attribute path): the parts timed, in the order they are printed. A part
#: missing from the tree (renamed, removed) is skipped with a note.
PARTS: list[tuple[str, str, str]] = [
    ("the call (ASGI app, in-process)", "", ""),
    ("read and parse the body", "app.cds.routes", "_json"),
    ("accept: service, JWT, request", "app.cds.service", "accept"),
    ("  client authentication", "app.cds.auth", "ClientAuthenticator.verify"),
    ("  request model", "app.cds.accept", "parse_hook_request"),
    ("  request digest", "app.cds.accept", "request_digest"),
    ("gather: prefetch R4 validation", "app.cds.prefetch", "readable"),
    ("  compiled R4 shapes", "app.cds.fhir_data", "problems"),
    ("  fhir.resources models (refusals' wording)", "app.cds.fhir_data", "_model_issues"),
    ("assemble the input", "app.cds.service", "assemble_input"),
    ("  hydration", "app.cds.assemble", "hydrate"),
    ("    literal readings", "app.fhir.literals", "LiteralReading._datum"),
    ("    records (object properties)", "app.fhir.objects", "ObjectReading._object"),
    ("    input status settled", "app.fhir.inputs", "InputRecorder.settle"),
    ("  World + api facts", "app.cds.assemble", "apply_api_facts"),
    ("the run, rendered and recorded", "app.cds.service", "HookService._run"),
    ("  run: workflow (rules, steps, tools)", "app.cds.service", "run_workflow"),
    ("  render: cards, actions, check", "app.cds.service", "render"),
    ("    cards of the declarations", "app.cds.render", "declared_cards"),
    ("    cards of unread draft orders", "app.cds.render", "unread_order_cards"),
    ("    system actions", "app.cds.render", "build_system_actions"),
    ("    response check", "app.cds.render", "check_response"),
    ("  record: the run's row", "app.cds.service", "run_record"),
    ("    outcome record (Runner)", "app.runtime.runner", "Runner.record"),
    ("    FHIR input, compressed", "app.cds.hook_input", "HookInput.to_bytes"),
    ("  store the run (one statement on PostgreSQL)", "app.cds.service", "store_run"),
    ("    the run store's record", "app.store.runs", "RunStore.record"),
    ("      parameters, JSON encoded", "app.store.runs", "_pg_params"),
    ("    a claimed run's outcome", "app.cds.claim", "RunClaim.record"),
    ("JSON response", "fastapi.responses", "JSONResponse.render"),
]


class Clock:
    """Inclusive CPU time per part; nesting of the same part counts once."""

    def __init__(self) -> None:
        self.total: dict[str, float] = {}
        self.depth: dict[str, int] = {}

    @contextmanager
    def part(self, label: str) -> Iterator[None]:
        outer = self.depth.get(label, 0) == 0
        self.depth[label] = self.depth.get(label, 0) + 1
        start = time.process_time()
        try:
            yield
        finally:
            self.depth[label] -= 1
            if outer:
                self.total[label] = self.total.get(label, 0.0) + time.process_time() - start

    def wrap(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        if asyncio.iscoroutinefunction(fn):

            async def awrapper(*args: Any, **kwargs: Any) -> Any:
                with self.part(label):
                    return await fn(*args, **kwargs)

            return awrapper

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.part(label):
                return fn(*args, **kwargs)

        return wrapper


def instrument(clock: Clock) -> list[str]:
    """Wrap every part that exists; returns the labels none of whose parts could be found (a
    label may name a part under its name in several versions of the code)."""
    found: set[str] = set()
    for label, module_name, path in PARTS[1:]:
        try:
            owner: Any = importlib.import_module(module_name)
            *outer, name = path.split(".")
            for attr in outer:
                owner = getattr(owner, attr)
            fn = getattr(owner, name)
        except (ImportError, AttributeError):
            continue
        setattr(owner, name, clock.wrap(label, fn))
        found.add(label)
    return [label for label, _, _ in PARTS[1:] if label not in found]


@contextmanager
def fresh_database(backend: str) -> Iterator[str]:
    from app.store.migrate import upgrade

    if backend == "sqlite":
        folder = Path(tempfile.mkdtemp(prefix="horismos-profile-"))
        try:
            url = f"sqlite:///{folder / 'profile.db'}"
            upgrade(url)
            yield url
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return
    import psycopg
    from psycopg import sql

    admin_url = os.environ.get("HORISMOS_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
    name = f"horismos_profile_{os.getpid()}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        url = admin_url.rsplit("/", 1)[0] + "/" + name
        upgrade(url)
        yield url
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


async def drive(
    url: str,
    calls: int,
    warmup: int,
    clock: Clock,
    service: tuple[str, dict[str, Any]] | None = None,
    profiler: Any = None,
) -> tuple[int, dict[str, Any]]:
    import httpx

    from app.main import create_app
    from app.settings import Settings

    app = create_app(Settings(database_url=url))
    sid, request = service or ("horismos-triage", triage_request())
    template = template_of(request)

    def body() -> bytes:
        text = template.replace(PLACEHOLDER, str(uuid.uuid4()))
        return text.replace(UNIQUE, secrets.token_hex(4)).encode()

    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            path = f"/cds-services/{sid}"
            headers = {"content-type": "application/json"}
            for _ in range(warmup):
                resp = await client.post(path, content=body(), headers=headers)
                if resp.status_code != 200:
                    raise RuntimeError(f"the hook answered {resp.status_code}: {resp.text[:300]}")
            clock.total.clear()
            last: dict[str, Any] = {}
            if profiler is not None:
                profiler.enable()
            for _ in range(calls):
                with clock.part(PARTS[0][0]):
                    resp = await client.post(path, content=body(), headers=headers)
                if resp.status_code != 200:
                    raise RuntimeError(f"the hook answered {resp.status_code}: {resp.text[:300]}")
                last = resp.json()
            if profiler is not None:
                profiler.disable()
    return calls, last


def profile_calls(args: argparse.Namespace, service: tuple[str, dict[str, Any]] | None) -> None:
    """``--cprofile``: the calls under cProfile, worker-thread stages run inline."""
    import cProfile
    import pstats

    from anyio import to_thread

    async def inline(fn: Callable[..., Any], *fn_args: Any, **_: Any) -> Any:
        return fn(*fn_args)

    to_thread.run_sync = inline  # type: ignore[assignment]
    profiler = cProfile.Profile(time.process_time)
    clock = Clock()
    with fresh_database(args.backend) as url:
        asyncio.run(drive(url, args.calls, args.warmup, clock, service, profiler))
    profiler.dump_stats(args.cprofile)
    stats = pstats.Stats(args.cprofile)
    stats.sort_stats("tottime").print_stats(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--cprofile", metavar="FILE", help="write a cProfile of the calls here")
    parser.add_argument(
        "--service",
        metavar="ID=FILE",
        help="profile this service with this CDS Hooks request instead of the triage hook",
    )
    args = parser.parse_args()
    service = None
    if args.service:
        sid, _, path = args.service.partition("=")
        service = (sid, json.loads(Path(path).read_text(encoding="utf-8")))
    import logging

    logging.disable(logging.WARNING)
    clock = Clock()
    if args.cprofile:
        profile_calls(args, service)
        return
    missing = instrument(clock)
    with fresh_database(args.backend) as url:
        calls, last = asyncio.run(drive(url, args.calls, args.warmup, clock, service))
    run = last["extension"]["dev.horismos.run"]
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"{args.backend} · {calls} sequential calls in-process · workflow {run['workflow']} ends "
        f"at {run['terminal']} · load average {load}"
    )
    whole = clock.total.get(PARTS[0][0], 0.0)
    print(f"{'part':<42}{'CPU ms/call':>12}{'share':>8}")
    shown: set[str] = set()
    for label, _module, _path in PARTS:
        if label in missing or label in shown:
            continue  # a part of another version of the code, or listed already
        shown.add(label)
        spent = clock.total.get(label, 0.0)
        print(f"{label:<42}{spent / calls * 1000:>12.2f}{spent / whole if whole else 0:>8.0%}")
    print(json.dumps({"cpu_ms_per_call": round(whole / calls * 1000, 3)}))


if __name__ == "__main__":
    main()
