"""Real server processes on loopback for the binding tests, and MCP pools on them."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from app.settings import McpServer
from app.tools.mcp import McpPool

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_until_free(port: int, deadline: float) -> None:
    """Until nothing listens on ``port``: a server that died mid-call may still hold it while
    its process exits, and would answer the readiness check of the one started after it."""
    while True:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"port {port} is still in use") from None
        time.sleep(0.05)  # readiness poll, not a race cover


@contextmanager
def serve(args: list[str], port: int, env: dict[str, str] | None = None) -> Iterator[str]:
    """Run ``python ARGS PORT`` until the block ends; yields ``http://127.0.0.1:PORT``."""
    _wait_until_free(port, time.monotonic() + 30)
    proc = subprocess.Popen(
        [sys.executable, *args, str(port)],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
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
        if proc.poll() is None:
            proc.terminate()
        proc.wait(10)
        if proc.stderr:
            proc.stderr.close()


@pytest.fixture(scope="module")
def http_tool_server() -> Iterator[str]:
    with serve([str(ROOT / "tests/tools/http_tool_server.py")], _free_port()) as base:
        yield base


@pytest.fixture(scope="module")
def mcp_server_url() -> Iterator[str]:
    """A streamable HTTP MCP server shared by a module's tests (none of them kills it)."""
    with serve(["-m", "tests.support.mcp_server", "http"], _free_port()) as base:
        yield f"{base}/mcp"


class McpEvents:
    """What a test MCP server logged (``MCP_TEST_LOG``): starts, listings and calls."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def all(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.all() if e["event"] == kind]


@pytest.fixture
def mcp_events(tmp_path: Path) -> McpEvents:
    return McpEvents(tmp_path / "mcp-events.jsonl")


@pytest.fixture
def mcp_http(mcp_events: McpEvents) -> Callable[..., Any]:
    """``with mcp_http(port=None) as url:`` — this test's own HTTP MCP server (it may kill it,
    or start it again on the same port)."""

    @contextmanager
    def start(port: int | None = None) -> Iterator[str]:
        env = {"MCP_TEST_LOG": str(mcp_events.path)}
        with serve(["-m", "tests.support.mcp_server", "http"], port or _free_port(), env) as base:
            yield f"{base}/mcp"

    return start


def stdio_server(events: McpEvents) -> McpServer:
    """A stdio MCP server the pool starts itself."""
    return McpServer(
        command=[sys.executable, "-m", "tests.support.mcp_server", "stdio"],
        env={"MCP_TEST_LOG": str(events.path), "PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )


@pytest.fixture
def pools() -> Iterator[Callable[[dict[str, McpServer]], McpPool]]:
    """``pools({"name": McpServer(...)})`` — a started pool, closed after the test."""
    made: list[McpPool] = []

    def make(servers: dict[str, McpServer]) -> McpPool:
        pool = McpPool(servers)
        pool.start()
        made.append(pool)
        return pool

    yield make
    for pool in made:
        pool.close()
