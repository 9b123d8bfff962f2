"""Fixtures of the change-control tests over HTTP: the bundled triage deployment copied into a
folder of its own (a change rewrites that file), served with one approver."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.changes.triage_calls import REVIEWER

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def triage_file(tmp_path: Path) -> Path:
    folder = tmp_path / "deployments"
    folder.mkdir()
    return Path(shutil.copy(ROOT / "ontologies/triage.ttl", folder / "triage.ttl"))


@pytest.fixture
def client(
    make_app_client: Callable[..., AbstractContextManager[TestClient]], triage_file: Path
) -> Iterator[TestClient]:
    with make_app_client(ontology_paths=[triage_file], change_approvers=[REVIEWER]) as c:
        yield c
