"""A hook call builds the proof of its decision once: the narration (when a workflow narrates),
the run's outcome, the cards and the answer's record of which rules were cited read that one."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.world import world as world_module
from tests.cds import clinical as fx


@pytest.fixture
def client(
    make_app_client: Callable[..., AbstractContextManager[TestClient]],
) -> Iterator[TestClient]:
    with make_app_client(public_base_url="https://cds.example.test") as c:
        yield c


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> Counter[tuple[str, str]]:
    """How many times each (subject, property) proof is built."""
    counts: Counter[tuple[str, str]] = Counter()
    original = world_module.build_proof

    def counting(ontology: Any, engine: Any, subject: str, prop: str, value: Any) -> Any:
        counts[(subject, prop.rsplit("#", 1)[-1])] += 1
        return original(ontology, engine, subject, prop, value)

    monkeypatch.setattr(world_module, "build_proof", counting)
    return counts


def _triage(pid: str, reason: str | None, heart_rate: float) -> dict[str, Any]:
    eid = fx.new_id()
    return fx.hook_request(
        "encounter-start",
        {"patientId": pid, "encounterId": eid},
        fhir_server=None,
        prefetch={
            "patient": fx.patient(pid),
            "encounter": fx.encounter(eid, pid, reason),
            "vitals": fx.searchset([fx.observation(pid, "8867-4", heart_rate, "/min")]),
            "conditions": fx.searchset([]),
        },
    )


def test_a_decided_call_builds_its_proof_once(
    client: TestClient, built: Counter[tuple[str, str]]
) -> None:
    pid = fx.new_id()
    body = client.post("/cds-services/horismos-triage", json=_triage(pid, None, 160)).json()
    [card] = body["cards"]
    assert body["extension"]["dev.horismos.run"]["decision"]["property"] == "acuity"
    assert "Immediate" in card["summary"]
    assert built[(pid, "acuity")] == 1


def test_an_escalated_call_builds_the_rules_proof_once(
    client: TestClient, built: Counter[tuple[str, str]]
) -> None:
    """No Bridge reads the free text: the run escalates, and the card still shows what the
    structured data derive; that proof is built once for the cards and the record of them."""
    pid = fx.new_id()
    body = client.post("/cds-services/horismos-triage", json=_triage(pid, "chest pain", 160)).json()
    [card] = body["cards"]
    assert "the rules give Immediate" in card["summary"]
    assert built[(pid, "acuity")] == 1
