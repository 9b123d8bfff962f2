"""What ``bench/hooks.py`` prints: a table per configuration (a backend and a worker count),
what one run of each hook does, and PASS/FAIL for each goal line.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from bench.hooks_wrk import Endpoint

#: the endpoints' labels (the triage hook's is its service id)
TRIAGE = "horismos-triage"
NOOP = "no-op parse"
BASELINE = "triage @ baseline"

# the goal lines (PostgreSQL, one worker unless said otherwise)
P99_GOAL_MS = 30.0
CPU_GOAL_MS = 2.5
SCALE_GOAL = 1.7
SQLITE_P99_GOAL_MS = 60.0
EXTRA_CPU_FACTOR = 2.0


def load_average() -> str:
    """The machine's 1, 5 and 15 minute load averages."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def table(backend: str, workers: int, endpoints: dict[str, Endpoint]) -> list[str]:
    """One configuration's lines: per endpoint its counts, latencies and CPU per request."""
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
    """Each goal line the configurations measured can be held to: (met, what it says)."""
    checks: list[tuple[bool, str]] = []
    pg1 = results.get(("postgresql", 1))
    if pg1 is not None:
        hook, noop = pg1[TRIAGE], pg1[NOOP]
        ratio = hook.rps / noop.rps
        checks += [
            (
                hook.percentile(99) <= P99_GOAL_MS,
                f"PG 1 worker: p99 {hook.percentile(99):.1f} ms <= {P99_GOAL_MS:g} ms "
                f"(throughput {ratio:.1%} of the no-op's)",
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
            (
                scale >= SCALE_GOAL,
                f"PG 2 workers: {scale:.2f}x one worker's throughput >= {SCALE_GOAL:g}x",
            )
        )
    for (backend, workers), endpoints in results.items():
        if backend == "sqlite" and workers == 1:
            p99 = endpoints[TRIAGE].percentile(99)
            checks.append(
                (
                    p99 <= SQLITE_P99_GOAL_MS,
                    f"SQLite 1 worker: p99 {p99:.1f} ms <= {SQLITE_P99_GOAL_MS:g} ms",
                )
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


def uvicorn_stack(options: str) -> str:
    """The event loop and HTTP parser uvicorn uses with ``options`` (its auto choice otherwise)."""
    import importlib.util

    words = shlex.split(options)

    def chosen(flag: str, fast: str, fallback: str) -> str:
        if flag in words and words.index(flag) + 1 < len(words):
            return words[words.index(flag) + 1]
        return fast if importlib.util.find_spec(fast) is not None else fallback

    return f"{chosen('--loop', 'uvloop', 'asyncio')}/{chosen('--http', 'httptools', 'h11')}"


def describe(sid: str, sample: dict[str, Any]) -> str:
    """What the sample call of ``sid`` did: where its workflow ended, its decision and cards."""
    decision = sample.get("decision") or {}
    what = f" ({decision.get('property')} = {decision.get('value')})" if decision else ""
    return (
        f"  {sid}: workflow {sample.get('workflow')} ends at {sample.get('terminal')}{what}, "
        f"{sample['cards']} card(s)"
    )
