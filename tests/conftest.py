"""Shared fixtures: real databases (SQLite and PostgreSQL, migrated with Alembic) and the app.

PostgreSQL comes from ``HORISMOS_TEST_DATABASE_URL`` (default
``postgresql://postgres@127.0.0.1:5432/test``); the session creates its own database
``horismos_test_<pid>`` on that server, migrates it and drops it at the end. When the server is
unreachable, PostgreSQL tests are skipped locally and the whole run fails under ``CI=true``:
CI must never fall back to SQLite silently.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg import sql
from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from app.main import create_app
from app.settings import Settings
from app.store import Base, make_engine
from app.store.migrate import upgrade
from app.store.runs import RunStore

pytest_plugins = ["tests.support.fhir_server"]

CI = os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}
PG_BASE_URL = os.environ.get(
    "HORISMOS_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
PG_TEST_DB = f"horismos_test_{os.getpid()}"
_PG_FIXTURES = {"pg_url", "pg_engine"}

# Settings a developer exported for their own server must not leak into tests (the suite's own,
# HORISMOS_TEST_*, stay).
for _name in [n for n in os.environ if n.startswith("HORISMOS_")]:
    if not _name.startswith("HORISMOS_TEST_"):
        del os.environ[_name]


def _conninfo(database: str) -> str:
    url = make_url(PG_BASE_URL).set(drivername="postgresql", database=database)
    return url.render_as_string(hide_password=False)


def _admin_connect() -> psycopg.Connection[Any]:
    """An autocommit connection to the server: the configured database, else ``postgres``."""
    configured = make_url(PG_BASE_URL).database or "postgres"
    try:
        return psycopg.connect(_conninfo(configured), autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        if "does not exist" not in str(exc) or configured == "postgres":
            raise
        return psycopg.connect(_conninfo("postgres"), autocommit=True, connect_timeout=3)


def _probe_postgres() -> str | None:
    """None when the server answers, else why not."""
    try:
        with _admin_connect() as connection:
            connection.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"
    return None


_PG_PROBLEM = _probe_postgres()


def pytest_report_header(config: pytest.Config) -> list[str]:
    pg_target = make_url(_conninfo(PG_TEST_DB)).render_as_string(hide_password=True)
    if _PG_PROBLEM is None:
        pg_line = f"postgresql at {pg_target}"
    elif CI:
        pg_line = f"postgresql UNREACHABLE ({_PG_PROBLEM}): failing, CI=true"
    else:
        pg_line = f"postgresql unreachable ({_PG_PROBLEM}): postgres tests skipped"
    return [f"horismos databases (CI={'true' if CI else 'false'}): sqlite (temp files), {pg_line}"]


def pytest_sessionstart(session: pytest.Session) -> None:
    if CI and _PG_PROBLEM is not None:
        pytest.exit(
            f"CI=true but PostgreSQL at {PG_BASE_URL} is unreachable: {_PG_PROBLEM}",
            returncode=1,
        )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _PG_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.postgres)


# --- databases ----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A fresh, migrated PostgreSQL database for this test session."""
    if _PG_PROBLEM is not None:
        message = f"PostgreSQL unreachable at {PG_BASE_URL}: {_PG_PROBLEM}"
        if CI:
            pytest.fail(message + " (CI=true: no fallback to SQLite)")
        pytest.skip(message)
    name = sql.Identifier(PG_TEST_DB)
    with _admin_connect() as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(name))
    url = _conninfo(PG_TEST_DB)
    try:
        upgrade(url)
        yield url
    finally:
        with _admin_connect() as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))


def _truncate_all(url: str) -> None:
    tables = ", ".join(f'"{t.name}"' for t in Base.metadata.sorted_tables)
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("SET lock_timeout = '10s'")
        connection.execute(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file; each test gets a copy (migrating once keeps tests fast)."""
    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"
    upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated, empty database on each backend; the test runs once per backend."""
    if request.param == "sqlite":
        path = tmp_path / "horismos.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        yield f"sqlite:///{path}"
        return
    url: str = request.getfixturevalue("pg_url")
    try:
        yield url
    finally:
        _truncate_all(url)


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    """An engine on a migrated database, once per backend (SQLite, PostgreSQL)."""
    eng = make_engine(database_url)
    try:
        yield eng
    finally:
        RunStore.of(eng).close()
        eng.dispose()


@pytest.fixture
def pg_engine(pg_url: str) -> Iterator[Engine]:
    """An engine on the session's PostgreSQL database (emptied after the test)."""
    eng = make_engine(pg_url)
    try:
        yield eng
    finally:
        RunStore.of(eng).close()
        eng.dispose()
        _truncate_all(pg_url)


# --- the app ------------------------------------------------------------------------------


@pytest.fixture
def app_settings() -> dict[str, Any]:
    """Overrides for ``app_client``'s Settings; parametrize this name to change them."""
    return {}


@pytest.fixture
def make_settings(database_url: str) -> Callable[..., Settings]:
    """Build Settings on the test database: ``make_settings(bridge_model="mock:…")``."""

    def build(**overrides: Any) -> Settings:
        overrides.setdefault("database_url", database_url)
        return Settings(**overrides)

    return build


@pytest.fixture
def make_app_client(
    make_settings: Callable[..., Settings],
) -> Callable[..., AbstractContextManager[TestClient]]:
    """``with make_app_client(**overrides) as client:`` — the app with its lifespan running."""

    @contextmanager
    def open_client(**overrides: Any) -> Iterator[TestClient]:
        with TestClient(create_app(make_settings(**overrides))) as client:
            yield client

    return open_client


@pytest.fixture
def app_client(
    make_app_client: Callable[..., AbstractContextManager[TestClient]],
    app_settings: dict[str, Any],
) -> Iterator[TestClient]:
    """A TestClient on the app (lifespan running) over a migrated database, per backend."""
    with make_app_client(**app_settings) as client:
        yield client
