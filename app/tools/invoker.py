"""``ToolInvoker``: resolves a tool's binding and calls it under its timeout.

Bindings (docs/tools.md):

- ``python:pkg.module.func`` or ``python:NAME`` — a dotted path, or a callable registered as
  ``tools={"NAME": fn}``; ``rust:NAME`` resolves to the same registry (this host has no Rust
  tools; the ontology loader rejects an unregistered ``rust:`` name at load).
  A callable receives the arguments as keyword arguments and returns a dict; one marked with
  :func:`tool_aware` receives a :class:`ToolCall` instead (for generic tools such as ``notify``
  that need the contract).
- ``http://…`` / ``https://…`` — a JSON POST of the arguments; a 2xx JSON object is the result.
- ``mcp://server/tool`` — a session of the host's :class:`~app.tools.mcp.McpPool` (one per
  configured server, reused by every call); the arguments are narrowed to the declared contract
  before the call.
- Adapter schemes (``fhir:…``, or any tool with ``horis:commits``) go to a handler the service
  layer registers with :meth:`ToolInvoker.register_scheme`; with none registered the call raises
  :class:`AdapterUnavailable` and the interpreter records the effect as ``proposed``. A handler
  whose ``may_send(tool)`` says the call sends nothing (a write refused before any request) is
  called on the calling thread, as a ``horis:pure`` tool is; any other call runs on a tool
  thread under its deadline.

The invoker returns the tool's raw result; validating it against ``horis:effect`` is the
interpreter's job (it is pure and replayable; this module does I/O).
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from app.ontology.loader import Registry
from app.ontology.model import ToolDef
from app.tools.call import ToolCall
from app.tools.errors import AdapterUnavailable, ToolError, ToolLoadError

if TYPE_CHECKING:
    import httpx

    from app.tools.mcp import McpPool

T = TypeVar("T")


SchemeHandler = Callable[[ToolCall], Mapping[str, Any]]

#: Names resolvable by ``python:NAME`` and ``rust:NAME`` bindings: the loader's own type.
ToolRegistry = Registry


def tool_aware(fn: Callable[[ToolCall], Mapping[str, Any]]) -> Callable[[ToolCall], Any]:
    """Mark a callable that takes the whole :class:`ToolCall` rather than keyword arguments."""
    fn.__horismos_tool_call__ = True  # type: ignore[attr-defined]
    return fn


def scheme_of(tool: ToolDef) -> str:
    """The binding's scheme: ``python``, ``rust``, ``http``, ``https``, ``mcp``, ``fhir``…"""
    if tool.commits is not None:
        return "fhir"
    return tool.binding.split(":", 1)[0]


@dataclass
class ToolInvoker:
    """Calls tools for the interpreter. One per host (or per request, for scheme handlers that
    close over a request's context)."""

    tools: ToolRegistry = field(default_factory=dict)
    mcp: McpPool | None = None
    http_client: httpx.Client | None = None
    _schemes: dict[str, SchemeHandler] = field(default_factory=dict)

    def register_scheme(self, scheme: str, handler: SchemeHandler) -> None:
        """Route adapter-mediated tools of ``scheme`` (e.g. ``fhir``) to ``handler``."""
        self._schemes[scheme] = handler

    def has_scheme(self, scheme: str) -> bool:
        return scheme in self._schemes

    def invoke(
        self,
        tool: ToolDef,
        args: dict[str, Any],
        *,
        timeout: float,
        now: datetime | None = None,
        run_id: str | None = None,
    ) -> dict[str, Any]:
        """Call ``tool`` with ``args`` (already read from the graph and contract-checked)."""
        call = ToolCall(tool=tool, args=dict(args), timeout=timeout, now=now, run_id=run_id)
        scheme = scheme_of(tool)
        if scheme in self._schemes:
            handler = self._schemes[scheme]
            # a handler that says this call sends nothing (a write refused before any request)
            # answers on the calling thread, as a pure tool does
            may_send = getattr(handler, "may_send", None)
            run = _inline if may_send is not None and not may_send(tool) else _with_timeout
            result: Any = run(lambda: handler(call), timeout)
        elif scheme == "fhir":
            raise AdapterUnavailable(scheme)
        elif scheme in ("python", "rust"):
            fn = self.resolve(tool.binding)
            run = _inline if tool.pure else _with_timeout
            if getattr(fn, "__horismos_tool_call__", False):
                result = run(lambda: fn(call), timeout)
            else:
                result = run(lambda: fn(**call.args), timeout)
        elif scheme in ("http", "https"):
            result = self._http(call)
        elif scheme == "mcp":
            if self.mcp is None:
                raise ToolError(f"{tool.binding}: no MCP server is configured on this host")
            result = self.mcp.call(call)
        else:
            raise ToolLoadError(f"{tool.iri}: unknown binding scheme in {tool.binding!r}")
        if not isinstance(result, Mapping):
            raise ToolError(
                f"{tool.name} returned {type(result).__name__}, not an object", kind="contract"
            )
        return dict(result)

    def resolve(self, binding: str) -> Callable[..., Any]:
        """The callable behind a ``python:``/``rust:`` binding."""
        scheme, _, name = binding.partition(":")
        if name in self.tools:
            return self.tools[name]
        if scheme == "rust":
            raise ToolLoadError(f"rust:{name} is not registered")
        module_name, _, attr = name.rpartition(".")
        if not module_name:
            raise ToolLoadError(f"python:{name} is neither registered nor a dotted path")
        try:
            fn = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise ToolLoadError(f"python:{name} does not resolve: {exc}") from exc
        if not callable(fn):
            raise ToolLoadError(f"python:{name} is not callable")
        return fn  # type: ignore[no-any-return]

    def _http(self, call: ToolCall) -> Any:
        import httpx

        client = self.http_client or httpx.Client()
        try:
            response = client.post(call.tool.binding, json=call.args, timeout=call.timeout)
        except httpx.TimeoutException as exc:
            raise ToolError(
                f"{call.tool.binding} timed out", retryable=True, kind="timeout"
            ) from exc
        except httpx.HTTPError as exc:
            raise ToolError(f"{call.tool.binding}: {exc}", retryable=True) from exc
        finally:
            if self.http_client is None:
                client.close()
        if response.status_code >= 500:
            raise ToolError(f"{call.tool.binding} answered {response.status_code}", retryable=True)
        if response.status_code >= 400:
            raise ToolError(f"{call.tool.binding} refused the call ({response.status_code})")
        try:
            return response.json()
        except json.JSONDecodeError as exc:
            raise ToolError(f"{call.tool.binding} did not answer JSON", kind="contract") from exc


#: Threads that run tool calls under their deadlines, shared by every run of the process
#: (starting a thread per call cost more than a refused write itself). A tool that ignores its
#: deadline keeps one busy until it returns; when every one is busy, later calls wait in line
#: and time out like any slow tool (fail closed) instead of starting threads without bound.
TOOL_THREADS = 32
_POOL = ThreadPoolExecutor(max_workers=TOOL_THREADS, thread_name_prefix="horismos-tool")


def _with_timeout(fn: Callable[[], T], timeout: float) -> T:
    """Run ``fn`` on the tool threads and give up after ``timeout`` seconds, counted from now.

    A Python thread cannot be killed: a tool that ignores its deadline keeps running in the
    background, but its late result is discarded and the step has already taken ``onError``. A
    call still waiting for a thread at its deadline is withdrawn: it never starts late.
    """
    future = _POOL.submit(fn)
    try:
        return future.result(timeout=timeout)
    except FutureTimeout as exc:
        future.cancel()  # not started yet: it never will be
        raise _late(timeout) from exc
    except ToolError:
        raise
    except Exception as exc:
        raise _failed(exc) from exc


def _inline(fn: Callable[[], T], timeout: float) -> T:
    """Run a call that cannot wait on anything on the calling thread (a ``horis:pure`` tool,
    which computes from its arguments only, or a write its handler refuses before any
    request): the hand-off to a tool thread (and back) would cost more than the call. Its
    deadline still holds: an answer or a failure later than ``timeout`` is a timeout, as on a
    tool thread, known only when the call returns (a call run this way must return promptly:
    nothing interrupts it)."""
    started = time.monotonic()
    try:
        result = fn()
    except Exception as exc:
        # as on a tool thread: past the deadline (or on a TimeoutError, which a tool thread's
        # wait cannot tell from its own) the call timed out, whatever the tool raised
        if isinstance(exc, TimeoutError) or time.monotonic() - started > timeout:
            raise _late(timeout) from exc
        if isinstance(exc, ToolError):
            raise
        raise _failed(exc) from exc
    if time.monotonic() - started > timeout:
        raise _late(timeout)
    return result


def _late(timeout: float) -> ToolError:
    return ToolError(f"no answer within {timeout}s", retryable=True, kind="timeout")


def _failed(exc: Exception) -> ToolError:
    """A tool's own failure, whatever its type, as a tool error (a ``TimeoutError`` never
    reaches here: both callers call it a timeout first)."""
    if isinstance(exc, ConnectionError):
        return ToolError(str(exc) or type(exc).__name__, retryable=True)
    return ToolError(f"{type(exc).__name__}: {exc}")
