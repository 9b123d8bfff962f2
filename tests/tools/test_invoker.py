"""ToolInvoker: every binding scheme, against real servers where there is a server."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from app.ontology.model import XSD, EffectDecl, ToolArg, ToolDef
from app.settings import McpServer
from app.tools import AdapterUnavailable, ToolCall, ToolError, ToolInvoker, ToolLoadError
from app.tools.builtin import OUTBOX
from app.tools.mcp import McpPool

NS = "http://example.org/t#"


def make_tool(binding: str, **kw: Any) -> ToolDef:
    return ToolDef(
        iri=NS + "assign",
        name="assign",
        args=(ToolArg(name="patient", type=NS + "Patient"), ToolArg(name="queue", type=NS + "Q")),
        effects=(
            EffectDecl(property=NS + "queuedAt", now=True),
            EffectDecl(property=NS + "queueRef", type=XSD + "string"),
        ),
        binding=binding,
        **kw,
    )


ARGS = {"patient": "p1", "queue": "Urgent"}


def assign(patient: str, queue: str) -> dict[str, Any]:
    return {"queueRef": f"{patient}:{queue}"}


def test_python_dotted_path_and_registered_callable() -> None:
    invoker = ToolInvoker(tools={"assign": assign})
    dotted = make_tool("python:tests.tools.test_invoker.assign")
    assert invoker.invoke(dotted, ARGS, timeout=5) == {"queueRef": "p1:Urgent"}
    assert invoker.invoke(make_tool("python:assign"), ARGS, timeout=5) == {"queueRef": "p1:Urgent"}
    assert invoker.invoke(make_tool("rust:assign"), ARGS, timeout=5) == {"queueRef": "p1:Urgent"}


def test_unresolvable_bindings_are_load_errors() -> None:
    invoker = ToolInvoker()
    with pytest.raises(ToolLoadError):
        invoker.invoke(make_tool("rust:assign"), ARGS, timeout=5)
    with pytest.raises(ToolLoadError):
        invoker.invoke(make_tool("python:no.such.module.fn"), ARGS, timeout=5)
    with pytest.raises(ToolLoadError):
        invoker.invoke(make_tool("ftp://x"), ARGS, timeout=5)


def test_python_timeout_is_a_retryable_timeout() -> None:
    release = threading.Event()

    def slow(patient: str, queue: str) -> dict[str, Any]:
        release.wait(10)
        return {"queueRef": "late"}

    invoker = ToolInvoker(tools={"slow": slow})
    with pytest.raises(ToolError) as info:
        invoker.invoke(make_tool("python:slow"), ARGS, timeout=0.2)
    release.set()
    assert info.value.kind == "timeout" and info.value.retryable


def test_a_call_that_cannot_start_before_its_deadline_never_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Tool calls share a bounded set of threads: one stuck tool holds the only thread here, the
    next call times out waiting for it, and is not run when the thread comes free."""
    from concurrent.futures import ThreadPoolExecutor

    import app.tools.invoker as invoker_module

    one = ThreadPoolExecutor(max_workers=1)
    monkeypatch.setattr(invoker_module, "_POOL", one)
    release, ran = threading.Event(), threading.Event()

    def stuck(patient: str, queue: str) -> dict[str, Any]:
        release.wait(10)
        return {"queueRef": "late"}

    def queued(patient: str, queue: str) -> dict[str, Any]:
        ran.set()
        return {"queueRef": "too late"}

    invoker = ToolInvoker(tools={"stuck": stuck, "queued": queued})
    for name in ("stuck", "queued"):
        with pytest.raises(ToolError) as info:
            invoker.invoke(make_tool(f"python:{name}"), ARGS, timeout=0.2)
        assert info.value.kind == "timeout"
    release.set()
    one.shutdown(wait=True)
    assert not ran.is_set()


def test_tool_calls_reuse_a_bounded_set_of_threads() -> None:
    threads: set[threading.Thread] = set()  # the objects themselves: no id is reused

    def where(patient: str, queue: str) -> dict[str, Any]:
        threads.add(threading.current_thread())
        return {"queueRef": "x"}

    invoker = ToolInvoker(tools={"where": where})
    for _ in range(100):
        invoker.invoke(make_tool("python:where"), ARGS, timeout=5)
    assert 1 <= len(threads) <= 32
    assert all(t.name.startswith("horismos-tool") for t in threads)


def test_a_non_object_result_is_out_of_contract() -> None:
    invoker = ToolInvoker(tools={"bad": lambda **_: ["not", "an", "object"]})
    with pytest.raises(ToolError) as info:
        invoker.invoke(make_tool("python:bad"), ARGS, timeout=5)
    assert info.value.kind == "contract"


def test_fhir_without_a_handler_is_proposed_and_with_one_is_called() -> None:
    tool = make_tool("fhir:commit")
    invoker = ToolInvoker()
    with pytest.raises(AdapterUnavailable):
        invoker.invoke(tool, ARGS, timeout=5)
    seen: list[ToolCall] = []

    def handler(call: ToolCall) -> dict[str, Any]:
        seen.append(call)
        return {"queueRef": "Encounter/e1/_history/2"}

    invoker.register_scheme("fhir", handler)
    assert invoker.invoke(tool, ARGS, timeout=5, run_id="r1") == {
        "queueRef": "Encounter/e1/_history/2"
    }
    assert seen[0].args == ARGS and seen[0].run_id == "r1"


def test_a_handler_that_sends_nothing_in_this_call_needs_no_tool_thread() -> None:
    """A write refused before any request (``may_send`` false: its scope is not granted) is
    answered on the calling thread; one that may send goes to a tool thread, under its
    deadline."""
    tool = make_tool("fhir:commit")
    where: list[threading.Thread] = []

    class Handler:
        def __init__(self, sends: bool) -> None:
            self.sends = sends

        def may_send(self, _tool: ToolDef) -> bool:
            return self.sends

        def __call__(self, call: ToolCall) -> dict[str, Any]:
            where.append(threading.current_thread())
            return {"queueRef": "x"}

    for sends in (False, True):
        invoker = ToolInvoker()
        invoker.register_scheme("fhir", Handler(sends))
        invoker.invoke(tool, ARGS, timeout=5, run_id="r1")
    assert where[0] is threading.current_thread()
    assert where[1] is not threading.current_thread()
    assert where[1].name.startswith("horismos-tool")


def test_builtin_notify_answers_the_declared_keys() -> None:
    invoker = ToolInvoker()
    tool = make_tool("python:app.tools.builtin.notify")
    out = invoker.invoke(tool, ARGS, timeout=5, run_id="r9")
    assert set(out) == {"queueRef"}
    assert OUTBOX[-1]["args"] == ARGS and OUTBOX[-1]["run"] == "r9"


def _calls(base: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(base + "/calls") as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def test_http_binding_posts_json_to_a_real_server(http_tool_server: str) -> None:
    invoker = ToolInvoker()
    out = invoker.invoke(make_tool(http_tool_server + "/assign"), ARGS, timeout=5)
    assert out == {"queueRef": "Q-Urgent"}
    assert _calls(http_tool_server)[-1] == {"path": "/assign", "body": ARGS}


def test_http_failures_are_classified(http_tool_server: str) -> None:
    invoker = ToolInvoker()
    with pytest.raises(ToolError) as info:
        invoker.invoke(make_tool(http_tool_server + "/broken"), ARGS, timeout=5)
    assert info.value.retryable
    with pytest.raises(ToolError) as info:
        invoker.invoke(make_tool(http_tool_server + "/refuse"), ARGS, timeout=5)
    assert not info.value.retryable
    with pytest.raises(ToolError) as info:
        invoker.invoke(make_tool(http_tool_server + "/text"), ARGS, timeout=5)
    assert info.value.kind == "contract"


def _mcp(pools: Callable[[dict[str, McpServer]], McpPool], url: str) -> ToolInvoker:
    return ToolInvoker(mcp=pools({"queues": McpServer(url=url)}))


def test_mcp_binding_sends_only_declared_arguments(
    mcp_server_url: str, pools: Callable[[dict[str, McpServer]], McpPool]
) -> None:
    invoker = _mcp(pools, mcp_server_url)
    out = invoker.invoke(make_tool("mcp://queues/assign_queue"), ARGS, timeout=20)
    # The server would echo a note if one were sent: the contract has none, so none was.
    assert out == {"queueRef": "Q-p1-Urgent", "echoNote": ""}


def test_mcp_tool_requiring_undeclared_arguments_cannot_be_called(
    mcp_server_url: str, pools: Callable[[dict[str, McpServer]], McpPool]
) -> None:
    invoker = _mcp(pools, mcp_server_url)
    with pytest.raises(ToolError) as info:
        invoker.invoke(make_tool("mcp://queues/needs_secret"), ARGS, timeout=20)
    assert info.value.kind == "contract" and "secret" in info.value.message


def test_mcp_errors(mcp_server_url: str, pools: Callable[[dict[str, McpServer]], McpPool]) -> None:
    invoker = _mcp(pools, mcp_server_url)
    with pytest.raises(ToolError) as info:
        invoker.invoke(make_tool("mcp://queues/no_such_tool"), ARGS, timeout=20)
    assert "no tool" in info.value.message
    with pytest.raises(ToolError) as info:
        invoker.invoke(make_tool("mcp://elsewhere/assign_queue"), ARGS, timeout=20)
    assert "no MCP server 'elsewhere' is configured" in info.value.message
    tool = ToolDef(
        iri=NS + "f",
        name="f",
        args=(ToolArg(name="patient", type=NS + "Patient"),),
        effects=(),
        binding="mcp://queues/fails",
    )
    with pytest.raises(ToolError) as info:
        invoker.invoke(tool, {"patient": "p1"}, timeout=20)
    assert "failed" in info.value.message and info.value.retryable


def test_a_pure_tool_runs_on_the_calling_thread_under_its_deadline() -> None:
    """A ``horis:pure`` tool computes from its arguments only: no hand-off to a tool thread.
    Its deadline still holds (a late answer is a timeout), and its failures are tool errors."""
    threads: list[threading.Thread] = []

    def where(patient: str, queue: str) -> dict[str, Any]:
        threads.append(threading.current_thread())
        return {"queueRef": "x"}

    def slow(patient: str, queue: str) -> dict[str, Any]:
        threading.Event().wait(0.3)
        return {"queueRef": "late"}

    def broken(patient: str, queue: str) -> dict[str, Any]:
        raise KeyError("dose")

    invoker = ToolInvoker(tools={"where": where, "slow": slow, "broken": broken})
    assert invoker.invoke(make_tool("python:where", pure=True), ARGS, timeout=5) == {
        "queueRef": "x"
    }
    assert threads == [threading.current_thread()]
    with pytest.raises(ToolError) as late:
        invoker.invoke(make_tool("python:slow", pure=True), ARGS, timeout=0.1)
    assert late.value.kind == "timeout" and late.value.retryable
    with pytest.raises(ToolError) as failed:
        invoker.invoke(make_tool("python:broken", pure=True), ARGS, timeout=5)
    assert "KeyError" in str(failed.value) and not failed.value.retryable


def test_a_pure_tool_that_fails_past_its_deadline_timed_out() -> None:
    """As on a tool thread: a failure after the deadline, or a TimeoutError the tool raises, is
    a timeout (retryable), not the tool's own error."""

    def late_failure(patient: str, queue: str) -> dict[str, Any]:
        threading.Event().wait(0.3)
        raise ValueError("bad input")

    def stalled(patient: str, queue: str) -> dict[str, Any]:
        raise TimeoutError("socket stalled")

    invoker = ToolInvoker(tools={"late": late_failure, "stalled": stalled})
    for name, timeout in (("late", 0.1), ("stalled", 5)):
        with pytest.raises(ToolError) as info:
            invoker.invoke(make_tool(f"python:{name}", pure=True), ARGS, timeout=timeout)
        assert info.value.kind == "timeout" and info.value.retryable, name
