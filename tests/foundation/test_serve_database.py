"""``horismos serve`` and its database: the embedded SQLite file is migrated before serving, a
PostgreSQL database that is not migrated is refused with the one command that fixes it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from psycopg import sql
from sqlalchemy.engine import make_url

from tests.support.live_server import free_port

ROOT = Path(__file__).resolve().parents[2]
SERVE = [sys.executable, "-c", "from app.cli import main; main()", "serve"]


def _env(database_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HORISMOS_")}
    return {**env, "HORISMOS_DATABASE_URL": database_url}


@pytest.fixture
def empty_pg_url(pg_url: str) -> Iterator[str]:
    """A PostgreSQL database on the test server that no migration has touched."""
    name = f"{make_url(pg_url).database}_empty"
    admin_url = make_url(pg_url).set(drivername="postgresql")
    with psycopg.connect(admin_url.render_as_string(hide_password=False), autocommit=True) as c:
        c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        c.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield admin_url.set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin_url.render_as_string(hide_password=False), autocommit=True) as c:
            c.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def test_serve_refuses_an_unmigrated_postgresql_with_the_fix(empty_pg_url: str) -> None:
    port = free_port()
    result = subprocess.run(
        [*SERVE, "--port", str(port)],
        cwd=ROOT,
        env=_env(empty_pg_url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "horismos db upgrade" in lines[0]
    assert "revision none (empty)" in lines[0]
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)


def test_serve_migrates_the_embedded_sqlite_database_itself(tmp_path: Path) -> None:
    database = tmp_path / "horismos.db"
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [*SERVE, "--port", str(port)],
            cwd=tmp_path,
            env=_env(f"sqlite:///{database}"),
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        ready = None
        deadline = time.monotonic() + 90
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline and process.poll() is None:
                try:
                    ready = client.get(f"http://127.0.0.1:{port}/readyz")
                    break
                except httpx.TransportError:
                    try:
                        process.wait(timeout=0.2)
                    except subprocess.TimeoutExpired:
                        continue
        assert ready is not None, log.read_text()
        assert ready.status_code == 200, ready.text
        assert ready.json()["database"] == "ok"
        assert f"SQLite database {database} migrated to revision" in log.read_text()
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
