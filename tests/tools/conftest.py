"""Real server processes on loopback for the binding tests."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(args: list[str], port: int) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, *args, str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"server exited: {proc.stderr.read().decode() if proc.stderr else ''}"
                )
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("server did not start") from None
                time.sleep(0.05)  # readiness poll, not a race cover
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stderr:
            proc.stderr.close()


@pytest.fixture(scope="module")
def http_tool_server() -> Iterator[str]:
    yield from _start([str(ROOT / "tests/tools/http_tool_server.py")], _free_port())


@pytest.fixture(scope="module")
def mcp_server_url() -> Iterator[str]:
    for base in _start(["-m", "tests.support.mcp_server"], _free_port()):
        yield f"{base}/mcp"
