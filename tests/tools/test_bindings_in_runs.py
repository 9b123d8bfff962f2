"""http(s): and mcp:// tools fired by an ActionStep: what lands is only what the contract allows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.ontology import load_ontology
from app.ontology.model import Ontology
from app.runtime import Outcome, RunContext, run_workflow
from app.settings import McpServer
from app.tools import ToolInvoker
from app.tools.mcp import McpPool
from app.world import World, load_structured
from tests.runtime.conftest import DATA, NOW

CASE = {"instances": [{"id": "c1", "class": "Case", "score": 42}]}


def ontology_with(binding: str, tmp_path: Path) -> Ontology:
    text = (DATA / "flows.ttl").read_text().replace('"python:issue"', f'"{binding}"')
    path = tmp_path / "flows.ttl"
    path.write_text(text)
    noop: dict[str, Callable[..., Any]] = {"book": lambda **_: {}, "lookup": lambda **_: {}}
    return load_ontology([path], registry=noop)


def run_issue(ontology: Ontology, invoker: ToolInvoker) -> tuple[Outcome, World]:
    world = World(ontology)
    assert load_structured(world, CASE).ok
    ctx = RunContext(now=NOW, tools=invoker, run_id="r")
    return run_workflow(ontology, "Issue", world, ctx), world


def test_an_http_tool_result_lands(http_tool_server: str, tmp_path: Path) -> None:
    ontology = ontology_with(f"{http_tool_server}/ticket", tmp_path)
    outcome, world = run_issue(ontology, ToolInvoker())

    assert outcome.terminal == "IssueDone"
    assert world.value("c1", ontology.namespace + "ticket") == "T-42"


@pytest.mark.parametrize("path", ["/garbage", "/refuse", "/text"])
def test_bad_http_answers_take_on_error(http_tool_server: str, tmp_path: Path, path: str) -> None:
    ontology = ontology_with(f"{http_tool_server}{path}", tmp_path)
    outcome, world = run_issue(ontology, ToolInvoker())

    assert outcome.terminal == "IssueFailed"
    assert world.value("c1", ontology.namespace + "ticket") is None


def test_an_mcp_tool_is_called_within_its_contract(
    mcp_server_url: str, tmp_path: Path, pools: Callable[[dict[str, McpServer]], McpPool]
) -> None:
    ontology = ontology_with("mcp://tickets/issue_ticket", tmp_path)
    invoker = ToolInvoker(mcp=pools({"tickets": McpServer(url=mcp_server_url)}))
    outcome, world = run_issue(ontology, invoker)

    assert outcome.terminal == "IssueDone", outcome.trace
    assert outcome.trace[0].args == {"case": "c1", "score": 42}
    assert world.value("c1", ontology.namespace + "ticket") == "T-5"


def test_an_out_of_contract_mcp_result_cannot_land(
    mcp_server_url: str, tmp_path: Path, pools: Callable[[dict[str, McpServer]], McpPool]
) -> None:
    ontology = ontology_with("mcp://tickets/issue_ticket_loose", tmp_path)
    invoker = ToolInvoker(mcp=pools({"tickets": McpServer(url=mcp_server_url)}))
    outcome, world = run_issue(ontology, invoker)

    assert outcome.terminal == "IssueFailed"
    assert "internalNote" in (outcome.trace[0].error or "")
    assert world.value("c1", ontology.namespace + "ticket") is None
