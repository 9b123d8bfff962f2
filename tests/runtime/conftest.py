"""Ontologies, a fixed clock, a run helper and an API client for the runtime tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.bridge import Bridge
from app.ontology import load_ontology
from app.ontology.model import Ontology
from app.runtime import Outcome, Recording, RunContext, run_workflow
from app.tools import ToolInvoker
from app.world import World, load_structured

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "runtime"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TRIAGE = ROOT / "ontologies" / "triage.ttl"
#: structured input that the triage rules decide as Immediate
CHEST_PAIN = {
    "instances": [
        {"id": "p1", "class": "Patient", "heartRate": 130, "age": 70, "hasSymptom": ["s1"]},
        {"id": "s1", "class": "ChestPain"},
    ]
}


class CountingTools:
    """Test tool callables that count their calls (so a test can prove one was not invoked)."""

    def __init__(self) -> None:
        self.calls: dict[str, list[dict[str, Any]]] = {}
        self.behaviour: dict[str, Callable[..., Any]] = {}

    def __getitem__(self, name: str) -> Callable[..., Any]:
        def call(**kwargs: Any) -> Any:
            self.calls.setdefault(name, []).append(kwargs)
            return self.behaviour[name](**kwargs)

        return call

    def registry(self, *names: str) -> dict[str, Callable[..., Any]]:
        return {name: self[name] for name in names}

    def count(self, name: str) -> int:
        return len(self.calls.get(name, []))


@pytest.fixture(scope="session")
def triage() -> Ontology:
    return load_ontology([ROOT / "ontologies" / "triage.ttl"])


@pytest.fixture
def counting() -> CountingTools:
    tools = CountingTools()
    tools.behaviour.update(
        book=lambda case, option: {"ticket": "T-1"},
        issue=lambda case, score: {"ticket": "T-2"},
        lookup=lambda case: {"ticket": "T-3"},
    )
    return tools


@pytest.fixture
def flows(counting: CountingTools) -> Ontology:
    return load_ontology(
        [DATA / "flows.ttl"], registry=counting.registry("book", "issue", "lookup")
    )


@pytest.fixture
def invoker(counting: CountingTools) -> ToolInvoker:
    return ToolInvoker(tools=counting.registry("book", "issue", "lookup"))


def world_of(ontology: Ontology, data: Mapping[str, Any]) -> World:
    world = World(ontology)
    if data.get("instances"):
        tx = load_structured(world, data)
        assert tx.ok, tx.violations
    return world


def run(
    ontology: Ontology,
    workflow: str,
    data: Mapping[str, Any],
    *,
    bridge: Bridge | None = None,
    tools: ToolInvoker | None = None,
    text: str | None = None,
    recorded: Recording | None = None,
    now: datetime = NOW,
) -> tuple[Outcome, World]:
    world = world_of(ontology, data)
    ctx = RunContext(
        now=now,
        bridge=bridge,
        tools=tools if tools is not None else ToolInvoker(),
        text=text,
        run_id="run-1",
        recorded=recorded,
    )
    return run_workflow(ontology, workflow, world, ctx), world


def steps(outcome: Outcome) -> list[tuple[str, str | None]]:
    return [(e.step, e.edge) for e in outcome.trace]


@pytest.fixture
def client(
    make_app_client: Callable[..., AbstractContextManager[TestClient]],
) -> Iterator[TestClient]:
    """The service over a migrated database, serving only the triage deployment."""
    with make_app_client(ontology_paths=[TRIAGE]) as c:
        yield c
