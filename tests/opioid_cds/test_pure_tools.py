"""The opioid toolkit's tools are ``horis:pure``: a hook run that calls them (MME, days of supply,
drug names) is stored in the one transaction that records its answer, with no claim committed
before the first call. The same deployment with the declaration taken away claims first, which
is what any other ``python:`` tool still does (it may act outside)."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from app.main import create_app
from app.settings import Settings
from tests.support.date_roller import roll

ROOT = Path(__file__).resolve().parents[2]
REQUEST = ROOT / "bench" / "data" / "opioidcds-08-two-active-opioids.json"
SERVICE = "opioidcds-08"


@contextmanager
def _service(tmp_path: Path, sqlite_template: Path, *, pure: bool) -> Iterator[TestClient]:
    """Recommendation 8 as bundled, or with ``horis:pure`` taken off its tools (and so off being
    answered ahead, which only a service of pure tools may be)."""
    folder = tmp_path / "opioid-cds"
    shutil.copytree(ROOT / "ontologies" / "opioid-cds", folder)
    common = folder / "common.ttl"
    text = common.read_text(encoding="utf-8")
    assert text.count("horis:pure true") == 4  # MME, supply, drug name, short drug name
    if not pure:
        common.write_text(text.replace(" ; horis:pure true .", " ."), encoding="utf-8")
        rec08 = folder / "rec08.ttl"
        service = rec08.read_text(encoding="utf-8")
        assert service.count("    horis:answeredAhead true ;\n") == 1
        rec08.write_text(service.replace("    horis:answeredAhead true ;\n", ""), encoding="utf-8")
    db = tmp_path / "horismos.db"
    db.write_bytes(sqlite_template.read_bytes())
    settings = Settings(
        database_url=f"sqlite:///{db}", ontology_paths=[common, folder / "rec08.ttl"]
    )
    with TestClient(create_app(settings)) as client:
        yield client


def _run_writes(client: TestClient) -> tuple[dict[str, Any], list[str]]:
    """One call of the service's bench request: its answer, and each statement that wrote the
    runs table (``INSERT``/``UPDATE``), in order."""
    writes: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        words = statement.split()
        if len(words) > 2 and words[0] in ("INSERT", "UPDATE"):
            table = words[2] if words[0] == "INSERT" else words[1]
            if table.strip('"') == "runs":
                writes.append(words[0])

    request = roll(json.loads(REQUEST.read_text()), datetime.now(UTC).date())
    request["hookInstance"] = str(uuid.uuid4())
    engine = client.app.state.container.running.engine  # type: ignore[attr-defined]
    event.listen(engine, "before_cursor_execute", record)
    try:
        response = client.post(f"/cds-services/{SERVICE}", json=request)
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert response.status_code == 200, response.text
    return response.json(), writes


def _tools_called(client: TestClient, answer: dict[str, Any]) -> set[str]:
    """The tools the run's trace records calls of, its subflows' included."""
    run_id = answer["extension"]["dev.horismos.run"]["runId"]
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "tool" and isinstance(node.get("tool"), str):
                found.add(node["tool"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(client.get(f"/runs/{run_id}").json()["trace"])
    return found


@pytest.mark.parametrize("pure", [True, False], ids=["pure", "declaration-removed"])
def test_a_run_of_pure_tools_is_stored_in_one_write_and_decides_alike(
    tmp_path: Path, sqlite_template: Path, pure: bool
) -> None:
    with _service(tmp_path, sqlite_template, pure=pure) as client:
        answer, writes = _run_writes(client)
        called = _tools_called(client, answer)

    assert {"orderMme", "prescriptionSupply"} <= called  # the run did call the toolkit
    assert [card["indicator"] for card in answer["cards"]] == ["warning"]  # and decided
    if pure:
        assert writes == ["INSERT"]  # the run row once, with its answer: no claim first
    else:
        assert writes[0] == "INSERT" and "UPDATE" in writes  # claimed running, then finished
