"""MCP servers under contract: real servers (the mcp SDK's) over stdio and streamable HTTP, called
by runs through one long-lived session per server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path
from typing import Any

import pytest

from app.ontology import load_ontology
from app.ontology.model import Ontology
from app.runtime import Outcome, RunContext, run_workflow
from app.runtime.replay import RecordedRun, replay_run
from app.settings import McpServer
from app.tools.host import ToolHost
from app.tools.packaged import PackagedTools
from app.world import World, load_structured
from tests.runtime.conftest import NOW
from tests.tools.conftest import McpEvents, stdio_server

ROOT = Path(__file__).resolve().parents[2]
TICKETING = ROOT / "tests" / "data" / "tools" / "ticketing.ttl"
CASE = {"instances": [{"id": "c1", "class": "Case", "score": 72}]}

HttpServer = Callable[..., AbstractContextManager[str]]


def _ticketing(tmp_path: Path, tool: str, timeout: str = "10s") -> Ontology:
    text = TICKETING.read_text().replace('"BINDING"', f'"mcp://tickets/{tool}"')
    path = tmp_path / f"ticketing-{tool}-{timeout}.ttl"
    path.write_text(text.replace('horis:timeout "10s"', f'horis:timeout "{timeout}"'))
    return load_ontology([path])


@pytest.fixture(params=["stdio", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def host(
    transport: str, mcp_events: McpEvents, mcp_http: HttpServer
) -> Iterator[tuple[ToolHost, Callable[[], AbstractContextManager[str]]]]:
    """A host with one server named "tickets" over ``transport``, connected; and a way to start
    that server again after it died (the pool's next call or probe reconnects)."""
    with ExitStack() as stack:
        if transport == "stdio":
            spec = stdio_server(mcp_events)

            def again() -> AbstractContextManager[str]:
                return ExitStack()  # the pool starts a new process itself

        else:
            url = stack.enter_context(mcp_http())
            spec = McpServer(url=url)
            port = int(url.split(":")[2].split("/")[0])

            def again() -> AbstractContextManager[str]:
                return mcp_http(port=port)

        made = ToolHost.from_servers({"tickets": spec}, packaged=PackagedTools())
        stack.callback(made.close)
        made.connect()
        yield made, again


def _run(ontology: Ontology, tools: ToolHost, run_id: str = "r1") -> tuple[Outcome, World]:
    world = World(ontology)
    assert load_structured(world, CASE).ok
    ctx = RunContext(now=NOW, tools=tools.invoker(), run_id=run_id)
    return run_workflow(ontology, "Ticket", world, ctx), world


def test_a_contract_conforming_call_lands_and_reuses_one_session(
    host: tuple[ToolHost, Any], tmp_path: Path, mcp_events: McpEvents
) -> None:
    tools, _ = host
    ontology = _ticketing(tmp_path, "ticket")
    assert tools.binding_problems(ontology) == []

    first, world = _run(ontology, tools, "r1")
    second, _ = _run(ontology, tools, "r2")

    assert first.terminal and first.terminal.endswith("Done"), first.trace
    assert second.terminal and second.terminal.endswith("Done")
    assert world.value("c1", ontology.namespace + "ticket") == "T-72"
    # only what the contract declares was sent; the tool's own extra flag kept its default
    calls = mcp_events.of("call")
    assert [c["args"] for c in calls] == [
        {"case": "c1", "score": 72, "severity": "Major", "urgent": False}
    ] * 2
    # one session (stdio: one process) served both runs
    assert len(mcp_events.of("list")) == 1
    assert len({e["pid"] for e in mcp_events.all()}) == 1
    assert tools.mcp is not None and tools.mcp.connections("tickets") == 1
    [call] = first.trace[1].calls
    assert (call.binding, call.result) == ("mcp://tickets/ticket", {"ticket": "T-72"})


def test_an_out_of_contract_result_takes_on_error_and_nothing_lands(
    host: tuple[ToolHost, Any], tmp_path: Path, mcp_events: McpEvents
) -> None:
    tools, _ = host
    ontology = _ticketing(tmp_path, "ticket_chatty")

    outcome, world = _run(ontology, tools)

    assert outcome.terminal and outcome.terminal.endswith("Failed")
    assert [c["tool"] for c in mcp_events.of("call")] == ["ticket_chatty"]  # it was called
    issue = outcome.trace[1]
    assert (issue.edge, "internalNote" in (issue.error or "")) == ("onError", True)
    assert world.value("c1", ontology.namespace + "ticket") is None
    assert world.value("c1", ontology.namespace + "issuedAt") is None


@pytest.mark.parametrize(
    ("tool", "says"),
    [
        ("ticket_whole_scores", "its argument 'score' is integer, not number"),
        ("ticket_major_only", "its argument 'severity' accepts only ['Major'], not ['Minor']"),
        ("needs_secret", "it takes no argument 'case'"),
        ("no_such_tool", "MCP server 'tickets' has no tool 'no_such_tool' (it offers"),
    ],
)
def test_a_schema_that_does_not_fit_the_contract_is_a_load_problem_naming_both(
    host: tuple[ToolHost, Any], tmp_path: Path, tool: str, says: str
) -> None:
    tools, _ = host
    ontology = _ticketing(tmp_path, tool)

    [(iri, message)] = tools.binding_problems(ontology)

    assert iri == ontology.namespace + "issue_ticket"
    assert says in message
    if tool != "no_such_tool":
        assert message.startswith(
            "issue_ticket (horis:takes case: Case, score: decimal, severity: Severity) "
            f"does not fit MCP tool tickets/{tool}: "
        )
    # a binding refused at load is never called
    outcome, _ = _run(ontology, tools)
    assert outcome.terminal and outcome.terminal.endswith("Failed")


def test_a_binding_to_a_server_nobody_configured_is_a_load_problem(
    host: tuple[ToolHost, Any], tmp_path: Path
) -> None:
    tools, _ = host
    text = TICKETING.read_text().replace('"BINDING"', '"mcp://billing/ticket"')
    path = tmp_path / "billing.ttl"
    path.write_text(text)

    [(_, message)] = tools.binding_problems(load_ontology([path]))

    assert message == (
        "mcp://billing/ticket: no MCP server 'billing' is configured in HORISMOS_MCP_SERVERS "
        "(configured: tickets)"
    )


def test_a_server_that_dies_mid_call_fails_the_step_and_the_next_call_reconnects(
    host: tuple[ToolHost, Any], tmp_path: Path, mcp_events: McpEvents
) -> None:
    tools, again = host
    assert tools.mcp is not None
    dying = _ticketing(tmp_path, "ticket_then_die")

    outcome, world = _run(dying, tools, "r1")

    assert outcome.terminal and outcome.terminal.endswith("Failed"), outcome.trace
    assert "went away during the call" in (outcome.trace[1].error or "")
    assert world.value("c1", dying.namespace + "ticket") is None
    assert tools.mcp.state("tickets")[0] == "unreachable"
    with again():  # the deadline covers reconnecting: give a loaded machine room for it
        back, world = _run(_ticketing(tmp_path, "ticket", timeout="20s"), tools, "r2")
    assert back.terminal and back.terminal.endswith("Done"), back.trace[1].error
    assert world.value("c1", dying.namespace + "ticket") == "T-72"
    assert len({e["pid"] for e in mcp_events.of("start")}) == 2  # a new process served it
    assert tools.mcp.connections("tickets") == 2


def test_horis_timeout_bounds_a_call_and_the_session_survives_it(
    host: tuple[ToolHost, Any], tmp_path: Path, transport: str
) -> None:
    tools, _ = host
    slow = _ticketing(tmp_path, "ticket_slow", timeout="500ms")

    outcome, _ = _run(slow, tools, "r1")

    issue = outcome.trace[1]
    assert outcome.terminal and outcome.terminal.endswith("Failed")
    assert issue.error == "no answer within 0.5s"
    assert (issue.calls[0].elapsedMs or 0) < 3000
    assert tools.mcp is not None and tools.mcp.state("tickets")[0] == "ready"
    fine, _ = _run(_ticketing(tmp_path, "ticket", timeout="20s"), tools, "r2")
    assert fine.terminal and fine.terminal.endswith("Done")


def test_a_recorded_mcp_call_replays_from_the_trace_without_calling_again(
    host: tuple[ToolHost, Any], tmp_path: Path, mcp_events: McpEvents
) -> None:
    tools, _ = host
    ontology = _ticketing(tmp_path, "ticket")
    world = World(ontology)
    assert load_structured(world, CASE).ok
    input_world = world.to_json()
    ctx = RunContext(now=NOW, tools=tools.invoker(), run_id="r1")
    outcome = run_workflow(ontology, "Ticket", world, ctx)
    recorded = RecordedRun.of(outcome, input_world=input_world, text=None, now=NOW)
    calls_before = len(mcp_events.of("call"))

    report = replay_run(ontology, recorded, tools=tools.invoker())

    assert report.same, report.divergences
    assert len(mcp_events.of("call")) == calls_before
    assert report.outcome is not None
    [replayed] = report.outcome.trace[1].calls
    assert (replayed.substituted, replayed.result) == (True, {"ticket": "T-72"})
