"""From a fresh clone, ``make serve`` installs the service and no dev tool, and serves the API
documentation from itself."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.support.live_server import free_port

ROOT = Path(__file__).resolve().parents[2]
DEV_TOOLS = {"pytest", "ruff", "mypy", "schemathesis", "hypothesis", "playwright", "uv"}
DEADLINE_SECONDS = 480.0

pytestmark = pytest.mark.skipif(
    not (ROOT / ".git").exists(), reason="needs the git checkout to clone from"
)


def _wait_healthy(base: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    with httpx.Client(timeout=2.0) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise AssertionError(
                    f"make serve exited ({process.returncode}):\n{log.read_text()}"
                )
            try:
                if client.get(base + "/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            try:
                process.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                continue
    raise AssertionError(
        f"make serve did not answer within {DEADLINE_SECONDS} s:\n{log.read_text()}"
    )


@pytest.mark.timeout(DEADLINE_SECONDS + 60)
def test_make_serve_from_a_fresh_clone_installs_no_dev_tool(tmp_path: Path) -> None:
    clone = tmp_path / "horismos"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    port = free_port()
    log = tmp_path / "make-serve.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HORISMOS_")}
    with log.open("wb") as sink:
        process = subprocess.Popen(
            ["make", "serve", f"PORT={port}"],
            cwd=clone,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # make and the server it starts stop together
        )
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_healthy(base, process, log)
        installed = subprocess.run(
            [str(clone / ".venv" / "bin" / "python"), "-m", "pip", "list", "--format=freeze"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        names = {line.split("==")[0].lower() for line in installed.splitlines()}
        assert "horismos" in names
        assert names.isdisjoint(DEV_TOOLS), sorted(names & DEV_TOOLS)
        with httpx.Client(base_url=base, timeout=10.0) as client:
            docs = client.get("/docs")
            assert docs.status_code == 200
            assert client.get("/docs/assets/swagger-ui-bundle.js").status_code == 200
            assert client.get("/readyz").status_code == 200  # migrated and serving
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
