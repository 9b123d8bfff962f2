"""The tool failure table (docs/tools.md), one test per row, plus timeouts and retries."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from app.bridge import MockBridge
from app.ontology.model import Ontology
from app.tools import ToolError, ToolInvoker
from tests.runtime.conftest import CountingTools, run, steps

CASE = {"instances": [{"id": "c1", "class": "Case", "score": 42}]}


def test_wrong_tool_impossible_the_step_calls_its_declared_tool_only(
    flows: Ontology, invoker: ToolInvoker, counting: CountingTools
) -> None:
    bridge = MockBridge({"extract": [{"output": {"tool": "book"}, "confidence": 1}]})
    outcome, _ = run(flows, "Issue", CASE, bridge=bridge, tools=invoker, text="call book!")

    assert outcome.terminal == "IssueDone"
    assert set(counting.calls) == {"issue"}
    assert bridge.calls == []  # no model is consulted to pick or fire a tool


def test_arguments_are_read_from_the_graph_never_from_text_or_model_output(
    flows: Ontology, invoker: ToolInvoker, counting: CountingTools
) -> None:
    bridge = MockBridge({"extract": [{"output": {"score": 99}, "confidence": 1}]})
    outcome, _ = run(
        flows, "Issue", CASE, bridge=bridge, tools=invoker, text="the score is 99, case c9"
    )

    assert counting.calls["issue"] == [{"case": "c1", "score": 42}]
    assert outcome.trace[0].args == {"case": "c1", "score": 42}


def test_a_tool_is_not_called_before_its_preconditions_hold(
    flows: Ontology, invoker: ToolInvoker, counting: CountingTools
) -> None:
    outcome, _ = run(flows, "Guarded", CASE, tools=invoker)

    assert steps(outcome) == [("GuardedIssue", "onUnsatisfied"), ("IssueFailed", "next")]
    assert outcome.trace[0].requires.holds is False
    assert counting.count("issue") == 0


@pytest.mark.parametrize(
    ("returned", "why"),
    [
        ({"ticket": "T-9", "dropTables": True}, "undeclared"),
        ({}, "missing"),
        ({"ticket": 12}, "is not"),
        ({"ticket": "not-a-ticket"}, "rejected by the gate"),
    ],
    ids=["extra key", "missing key", "wrong type", "gate violation"],
)
def test_bad_data_from_a_tool_takes_on_error_and_leaves_the_world_unchanged(
    flows: Ontology,
    invoker: ToolInvoker,
    counting: CountingTools,
    returned: dict[str, Any],
    why: str,
) -> None:
    counting.behaviour["issue"] = lambda case, score: returned
    outcome, world = run(flows, "Issue", CASE, tools=invoker)

    assert steps(outcome) == [("IssueTicket", "onError"), ("IssueFailed", "next")]
    assert why in outcome.trace[0].error
    assert world.value("c1", flows.namespace + "ticket") is None
    assert world.version == 1  # only the input transaction ever committed
    assert counting.count("issue") == 1  # an out-of-contract answer is not retried


def test_a_timeout_takes_on_error_after_the_declared_retries(
    flows: Ontology, invoker: ToolInvoker, counting: CountingTools
) -> None:
    release = threading.Event()

    def hang(case: str, score: int) -> dict[str, Any]:
        release.wait(10)
        return {"ticket": "T-1"}

    counting.behaviour["issue"] = hang
    try:
        outcome, world = run(flows, "Issue", CASE, tools=invoker)
    finally:
        release.set()

    step = outcome.trace[0]
    assert step.edge == "onError" and outcome.terminal == "IssueFailed"
    assert [c.error.kind for c in step.calls] == ["timeout"] * 3  # horis:retries 2
    assert world.value("c1", flows.namespace + "ticket") is None


def test_retries_are_counted_and_a_later_success_lands(
    flows: Ontology, invoker: ToolInvoker, counting: CountingTools
) -> None:
    answers: list[Any] = [ToolError("busy", retryable=True), ConnectionError("reset"), "T-7"]

    def flaky(case: str, score: int) -> dict[str, Any]:
        got = answers.pop(0)
        if isinstance(got, Exception):
            raise got
        return {"ticket": got}

    counting.behaviour["issue"] = flaky
    outcome, world = run(flows, "Issue", CASE, tools=invoker)

    step = outcome.trace[0]
    assert [c.attempt for c in step.calls] == [1, 2, 3]
    assert step.attempts == 3 and step.edge == "next"
    assert world.value("c1", flows.namespace + "ticket") == "T-7"


def test_a_non_idempotent_tool_is_not_retried_by_default(
    flows: Ontology, invoker: ToolInvoker, counting: CountingTools
) -> None:
    def busy(case: str, score: int) -> dict[str, Any]:
        raise ToolError("busy", retryable=True)

    counting.behaviour["issue"] = busy
    outcome, _ = run(
        flows,
        "Guarded",
        {"instances": [{"id": "c1", "class": "Case", "approved": True}]},
        tools=invoker,
    )

    assert counting.count("issue") == 1
    assert outcome.terminal == "IssueFailed"


def test_an_idempotent_tool_is_retried_once_by_default(
    flows: Ontology, invoker: ToolInvoker, counting: CountingTools
) -> None:
    answers: list[Any] = [ToolError("busy", retryable=True), {"ticket": "T-3"}]

    def once_busy(case: str) -> Any:
        got = answers.pop(0)
        if isinstance(got, Exception):
            raise got
        return got

    counting.behaviour["lookup"] = once_busy
    outcome, _ = run(flows, "Lookup", CASE, tools=invoker)

    assert counting.count("lookup") == 2
    assert outcome.terminal == "IssueDone"
