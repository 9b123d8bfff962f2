"""The service as a real process: uvicorn on a loopback port, configured through its environment,
for tests that need what a TestClient cannot give (SIGKILL, a real event loop under load).

``start_server(env)`` starts ``uvicorn app.main:create_app --factory`` with the given
``HORISMOS_*`` variables (none inherited from the test process) and waits until ``/healthz``
answers; ``server.kill()`` sends SIGKILL, ``server.stop()`` a graceful SIGTERM. Every process is
stopped when its context ends, whatever the test did.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
READY_DEADLINE_SECONDS = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LiveServer:
    base: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    def output(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def kill(self) -> None:
        """SIGKILL: no shutdown handler runs, as when the machine or the OOM killer stops it."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


def _environment(env: dict[str, str]) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("HORISMOS_")}
    return {**base, **env}


def _wait_ready(server: LiveServer, deadline: float) -> None:
    with httpx.Client(timeout=2.0) as client:
        while time.monotonic() < deadline:
            if server.process.poll() is not None:
                raise RuntimeError(
                    f"the service exited ({server.process.returncode}):\n{server.output()}"
                )
            try:
                if client.get(server.base + "/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            try:
                server.process.wait(timeout=0.1)
            except subprocess.TimeoutExpired:
                continue
    raise RuntimeError(f"the service did not become healthy:\n{server.output()}")


def launch(env: dict[str, str], log_path: Path, *, port: int | None = None) -> LiveServer:
    """Start the service and wait until it answers ``/healthz``."""
    port = port or free_port()
    with log_path.open("ab") as sink:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "app.main:create_app",
                "--factory",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=_environment(env),
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    server = LiveServer(
        base=f"http://127.0.0.1:{port}", port=port, process=process, log_path=log_path
    )
    try:
        _wait_ready(server, time.monotonic() + READY_DEADLINE_SECONDS)
    except BaseException:
        server.kill()
        raise
    return server


@contextmanager
def live_server(env: dict[str, str], log_path: Path) -> Iterator[LiveServer]:
    server = launch(env, log_path)
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def sqlite_live_server(
    sqlite_template: Path, where: Path, extra: dict[str, str] | None = None
) -> Iterator[LiveServer]:
    """The service on a copy of the migrated SQLite ``sqlite_template`` in ``where``, its
    public base URL its own loopback address, no reconciliation loop, plus ``extra`` settings."""
    database = where / "horismos.db"
    shutil.copyfile(sqlite_template, database)
    port = free_port()
    env = {
        "HORISMOS_DATABASE_URL": f"sqlite:///{database}",
        "HORISMOS_PUBLIC_BASE_URL": f"http://127.0.0.1:{port}",
        "HORISMOS_RECONCILE_INTERVAL_SECONDS": "0",
        **(extra or {}),
    }
    server = launch(env, where / "server.log", port=port)
    try:
        yield server
    finally:
        server.stop()
