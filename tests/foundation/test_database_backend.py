"""The suite exercises the database production uses: PostgreSQL, never a silent substitute."""

from __future__ import annotations

import os

from sqlalchemy import Engine, text


def test_postgres_fixture_runs_on_a_fresh_postgresql_database(pg_engine: Engine) -> None:
    # Under CI=true an unreachable server fails this test instead of skipping it.
    assert pg_engine.dialect.name == "postgresql"
    with pg_engine.connect() as connection:
        database = connection.execute(text("SELECT current_database()")).scalar_one()
        server = connection.execute(text("SHOW server_version")).scalar_one()
    assert database == f"horismos_test_{os.getpid()}"
    assert int(server.split(".")[0]) >= 13


def test_engine_fixture_covers_both_backends(engine: Engine, database_url: str) -> None:
    assert engine.dialect.name == database_url.split(":", 1)[0]
    assert engine.dialect.name in {"sqlite", "postgresql"}
    if engine.dialect.name == "sqlite":
        with engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar_one() == 1
