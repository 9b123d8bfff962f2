"""Fixtures shared by the opioid services' tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings


@pytest.fixture(scope="module")
def client(
    sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[TestClient]:
    """The service with its bundled deployments on a fresh SQLite database, one per test module
    (each call carries a hookInstance of its own)."""
    module = request.module.__name__.rsplit(".", 1)[-1]
    path = tmp_path_factory.mktemp(module) / "horismos.db"
    path.write_bytes(sqlite_template.read_bytes())
    with TestClient(create_app(Settings(database_url=f"sqlite:///{path}"))) as app_client:
        yield app_client
