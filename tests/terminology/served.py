"""``horismos terminology serve`` as a real process on loopback, for the HTTP client's tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.support.live_server import free_port

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def served_terminology(ontology: Path, *, ready_within: float = 60.0) -> Iterator[str]:
    """The base URL of the embedded terminology serving ``ontology``'s files, in its own
    process; stopped (by its own pid) when the block ends."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from app.cli import app; app()",
            "terminology",
            "serve",
            "--port",
            str(port),
            "--ontology",
            str(ontology),
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        until = time.monotonic() + ready_within
        while True:  # ready when it answers; a process that died says why
            if process.poll() is not None:
                raise RuntimeError(f"terminology serve exited: {process.stderr.read()!r}")  # type: ignore[union-attr]
            try:
                if httpx.get(f"{base}/metadata", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > until:
                raise RuntimeError("terminology serve did not start")
            time.sleep(0.05)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()
