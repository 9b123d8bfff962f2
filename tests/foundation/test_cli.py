"""The ``horismos`` command as a newcomer uses it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sqlalchemy import inspect

from app.store import make_engine


def _horismos(*args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [sys.executable, "-c", "from app.cli import main; main()", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_db_upgrade_creates_the_schema_from_any_directory(tmp_path: Path) -> None:
    db = tmp_path / "fresh.db"
    out = _horismos("db", "upgrade", "--url", f"sqlite:///{db}", cwd=tmp_path)
    assert "database at revision" in out
    engine = make_engine(f"sqlite:///{db}")
    try:
        assert {"runs", "trace_events", "effects", "feedback"} <= set(
            inspect(engine).get_table_names()
        )
    finally:
        engine.dispose()


def test_db_upgrade_reads_the_database_url_setting(tmp_path: Path) -> None:
    db = tmp_path / "from-env.db"
    env = {"PATH": "/usr/bin:/bin", "HORISMOS_DATABASE_URL": f"sqlite:///{db}"}
    _horismos("db", "upgrade", cwd=tmp_path, env=env)
    assert db.exists()


def test_openapi_writes_the_document(tmp_path: Path) -> None:
    target = tmp_path / "out" / "openapi.json"
    _horismos("openapi", "--output", str(target), cwd=tmp_path)
    text = target.read_text()
    assert text.endswith("}\n")
    assert '"/healthz"' in text
