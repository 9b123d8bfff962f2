"""The servers ``bench/hooks.py`` puts under load, each a uvicorn process on a free loopback
port, and the CPU processes use, read from ``/proc``: a server's process with every
descendant (its workers), a set of pids (the database's backends), the whole machine.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

TICK_MS = 1000.0 / os.sysconf("SC_CLK_TCK")


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
    """CPU ticks of each of ``pids`` that is still alive."""
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
    """One uvicorn process serving on ``port``."""

    name: str
    port: int
    proc: subprocess.Popen[bytes]

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def serve(
    name: str, app: str, env: dict[str, str], workers: int, extra: list[str], root: Path
) -> Server:
    """``app`` (a factory) under uvicorn with ``workers`` and ``extra`` options, run from the
    checkout ``root``."""
    port = _free_port()
    cmd = [
        sys.executable, "-m", "uvicorn", app, "--factory",
        "--host", "127.0.0.1", "--port", str(port),
        "--workers", str(workers), "--log-level", "warning", "--no-access-log", *extra,
    ]  # fmt: skip
    return Server(name, port, subprocess.Popen(cmd, cwd=root, env={**env, "PYTHONPATH": str(root)}))


def wait_ready(server: Server, timeout: float = 120.0) -> None:
    """Return once ``server`` answers its health check; raise if it exits or times out."""
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


def stop(servers: list[Server]) -> None:
    """Terminate every server, then kill those still running after 15 s."""
    for s in servers:
        s.proc.terminate()
    for s in servers:
        try:
            s.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            s.proc.kill()
            s.proc.wait()
