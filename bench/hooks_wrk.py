"""One wrk run against one endpoint (``bench/hooks.lua`` fills each request's fresh ids and
writes the counts and latency quantiles), with the CPU each party used meanwhile; and what an
endpoint's runs add up to.
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.hooks_servers import TICK_MS, Server, machine_ticks, pids_ticks, tree_ticks

LUA = Path(__file__).resolve().with_name("hooks.lua")


@dataclass
class Slice:
    """What one wrk run measured: its requests and latencies, and the CPU each party used."""

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
    """One endpoint's slices, merged: the figures the report prints for it."""

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
