"""``mcp://NAME/tool`` bindings: one long-lived MCP session per configured server.

:class:`McpPool` holds a client session to every server of ``HORISMOS_MCP_SERVERS`` (streamable
HTTP with optional headers, or a stdio command the pool starts) on its own event loop, in one
background thread, so the runtime's worker threads call tools synchronously and every call
reuses the session. Per server:

- **connect**: open the session and list its tools (all pages); the host then checks every
  binding to it against the declared contract (:mod:`app.tools.mcp_contract`);
- **call**: narrow the arguments to the contract, call under the step's ``horis:timeout`` (the
  deadline covers reconnecting), return the structured result (or the JSON object of the first
  text block) for effect validation, where undeclared keys are refused;
- **lose**: a server that dies (mid-call or idle) is marked ``unreachable`` with the reason; the
  call in flight fails as a retryable ``ToolError`` (the step retries or takes ``onError``), and
  the next call or readiness probe reconnects. The process never dies with it.

A server unreachable at start makes the deployments that bind it unready (``/readyz``); it is
connected and checked when it comes back.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import urlsplit

from app.tools.errors import ToolError
from app.tools.mcp_contract import narrow

if TYPE_CHECKING:
    from app.settings import McpServer
    from app.tools.call import ToolCall

log = logging.getLogger("horismos.mcp")

T = TypeVar("T")
LinkState = Literal["connecting", "ready", "unreachable"]
#: How long the pool waits for every server when it starts, and a readiness probe for one.
CONNECT_SECONDS = 10.0


def parse_binding(binding: str) -> tuple[str, str]:
    """``mcp://ehr-server/assign_queue`` → ``("ehr-server", "assign_queue")``."""
    parts = urlsplit(binding)
    tool = parts.path.strip("/")
    if parts.scheme != "mcp" or not parts.netloc or not tool:
        raise ToolError(f"{binding!r} is not mcp://server/tool")
    return parts.netloc, tool


@dataclass(frozen=True, kw_only=True)
class ListedTool:
    """A tool as its server lists it."""

    name: str
    input_schema: Mapping[str, Any] | None
    output_schema: Mapping[str, Any] | None


@dataclass
class _Link:
    """One server's session and what is known about it."""

    name: str
    spec: McpServer
    state: LinkState = "connecting"
    error: str | None = None
    tools: dict[str, ListedTool] = field(default_factory=dict)
    client: Any = None
    task: asyncio.Task[None] | None = None
    stop: asyncio.Event | None = None
    settled: asyncio.Event | None = None  # set when an attempt to connect has ended
    lock: asyncio.Lock | None = None
    connections: int = 0


def _describe(exc: BaseException) -> str:
    """The innermost, most telling message of an exception (task groups wrap them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class McpPool:
    """Sessions to the configured MCP servers, shared by every run of the process."""

    def __init__(self, servers: Mapping[str, McpServer]) -> None:
        self._links = {name: _Link(name=name, spec=spec) for name, spec in servers.items()}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Lock()
        #: bindings the host found out of contract: ``mcp://NAME/tool`` → why (never called)
        self.refused: dict[str, str] = {}
        #: called with the server's name after every (re)connection, from the pool's thread
        self.on_connect: Callable[[str], None] | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        return sorted(self._links)

    def start(self) -> None:
        """Start the pool's event loop (idempotent); sessions open on demand."""
        with self._started:
            if self._loop is not None:
                return
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="horismos-mcp", daemon=True)
            thread.start()
            self._loop, self._thread = loop, thread
        for link in self._links.values():
            self._submit(self._prepare(link)).result(5)

    def connect_all(self, timeout: float = CONNECT_SECONDS) -> None:
        """Open every session, concurrently, waiting at most ``timeout`` for all of them."""
        self.start()
        futures = [self._submit(self._connect(link, timeout)) for link in self._links.values()]
        for future in futures:
            try:
                future.result(timeout + 1)
            except (FutureTimeout, Exception):  # the link records why; readiness reports it
                continue

    def close(self) -> None:
        """Close every session (stdio servers are stopped) and the event loop."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            self._submit(self._close_all()).result(10)
        except (FutureTimeout, Exception) as exc:
            log.warning("closing the MCP sessions: %s", _describe(exc))
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
        self._loop = self._thread = None

    # --- what the host reads -----------------------------------------------------------------

    def state(self, name: str) -> tuple[LinkState, str | None]:
        link = self._links[name]
        return link.state, link.error

    def listed(self, name: str) -> dict[str, ListedTool] | None:
        """The server's tools as last listed, or None when it was never reached."""
        link = self._links.get(name)
        return dict(link.tools) if link is not None and link.connections else None

    def connections(self, name: str) -> int:
        """How many sessions the pool has opened to the server (1 while it stays up)."""
        return self._links[name].connections

    def wake(self) -> None:
        """Start reconnecting every unreachable server, without waiting (a readiness probe)."""
        down = [link for link in self._links.values() if link.state == "unreachable"]
        if down:
            self.start()
            for link in down:
                self._submit(self._connect(link, CONNECT_SECONDS))

    # --- calls ---------------------------------------------------------------------------------

    def call(self, call: ToolCall) -> Any:
        """Call ``call.tool``'s MCP tool under ``call.timeout``; the raw result object."""
        server, name = parse_binding(call.tool.binding)
        if server not in self._links:
            raise ToolError(f"no MCP server {server!r} is configured (HORISMOS_MCP_SERVERS)")
        refused = self.refused.get(call.tool.binding)
        if refused is not None:
            raise ToolError(refused, kind="contract")
        self.start()
        future = self._submit(self._call(self._links[server], name, call))
        try:
            return future.result(call.timeout + 1)
        except FutureTimeout as exc:
            future.cancel()
            raise ToolError(
                f"no answer within {call.timeout}s", retryable=True, kind="timeout"
            ) from exc

    async def _call(self, link: _Link, name: str, call: ToolCall) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + call.timeout
        if link.state != "ready":
            await self._connect(link, call.timeout)
        if link.state != "ready" or link.client is None:
            raise ToolError(
                f"MCP server {link.name!r} is unreachable: {link.error}", retryable=True
            )
        listed = link.tools.get(name)
        if listed is None:
            raise ToolError(f"MCP server {link.name!r} has no tool {name!r}", kind="contract")
        arguments = narrow(call.tool, call.args, listed.input_schema)
        remaining = max(deadline - loop.time(), 0.01)
        client = link.client
        try:
            result = await asyncio.wait_for(client.call_tool(name, arguments), remaining)
        except TimeoutError as exc:
            raise ToolError(
                f"no answer within {call.timeout}s", retryable=True, kind="timeout"
            ) from exc
        except asyncio.CancelledError:
            if link.task is not None and not link.task.done():
                raise  # the caller gave up: not the server's doing
            self._lost(link, "the session ended during the call")
            raise ToolError(
                f"MCP server {link.name!r} went away during the call", retryable=True
            ) from None
        except Exception as exc:
            if _answered(exc):  # the server is there and said no (a JSON-RPC error)
                raise ToolError(
                    f"MCP tool {name!r} refused the call: {exc}", kind="contract"
                ) from exc
            why = _describe(exc)
            self._lost(link, why)
            raise ToolError(
                f"MCP server {link.name!r} went away during the call: {why}", retryable=True
            ) from exc
        return _result(name, result)

    # --- sessions ------------------------------------------------------------------------------

    def _submit(self, coroutine: Coroutine[Any, Any, T]) -> Future[T]:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    async def _prepare(self, link: _Link) -> None:
        link.lock, link.stop, link.settled = asyncio.Lock(), asyncio.Event(), asyncio.Event()

    async def _connect(self, link: _Link, timeout: float) -> None:
        """Make sure a session is open (or an attempt has ended), within ``timeout``."""
        assert link.lock is not None and link.settled is not None
        async with link.lock:
            if link.state == "ready" and link.task is not None and not link.task.done():
                return
            ending = link.task is not None and not link.task.done() and link.state != "connecting"
            if ending and link.task is not None and link.stop is not None:
                # a session that broke is still closing (a stdio server being reaped): let it
                # end before opening the next one
                link.stop.set()
                closed, _ = await asyncio.wait({link.task}, timeout=timeout)
                if not closed:
                    link.error = f"the previous session did not close within {timeout}s"
                    return
            if link.task is None or link.task.done():
                link.state, link.settled = "connecting", asyncio.Event()
                link.stop = asyncio.Event()
                link.task = asyncio.create_task(self._hold(link), name=f"mcp:{link.name}")
            settled = link.settled
        try:
            await asyncio.wait_for(settled.wait(), timeout)
        except TimeoutError:
            if link.state == "connecting":
                link.error = f"no session within {timeout}s"

    async def _hold(self, link: _Link) -> None:
        """Open the session, list the tools, keep the session until told to stop or it dies."""
        assert link.stop is not None and link.settled is not None
        try:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(await self._client(link, stack))
                tools = await _list_tools(client)
                link.client, link.tools, link.connections = client, tools, link.connections + 1
                link.state, link.error = "ready", None
                log.info("MCP server %s: session open, %d tool(s)", link.name, len(tools))
                if self.on_connect is not None:
                    self.on_connect(link.name)
                link.settled.set()
                await link.stop.wait()
        except asyncio.CancelledError:
            link.error = link.error or "closed"
        except BaseException as exc:  # a transport failure of any kind ends this session
            link.error = _describe(exc)
            log.warning("MCP server %s is unreachable: %s", link.name, link.error)
        finally:
            link.client, link.state = None, "unreachable"
            link.error = link.error or "the session ended"
            link.settled.set()

    async def _client(self, link: _Link, stack: AsyncExitStack) -> Any:
        from mcp import Client

        spec = link.spec
        if spec.command is not None:
            from mcp.client.stdio import StdioServerParameters

            params = StdioServerParameters(
                command=spec.command[0], args=spec.command[1:], env=spec.env, cwd=spec.cwd
            )
            return Client(params, cache=None)
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers=spec.headers, timeout=httpx2.Timeout(10.0, read=300.0))
        )
        assert spec.url is not None
        return Client(streamable_http_client(spec.url, http_client=http), cache=None)

    def _lost(self, link: _Link, why: str) -> None:
        """The session broke: end it, so the next call or probe opens a new one."""
        link.state, link.error = "unreachable", why
        if link.stop is not None:
            link.stop.set()

    async def _close_all(self) -> None:
        for link in self._links.values():
            if link.stop is not None:
                link.stop.set()
        tasks = [link.task for link in self._links.values() if link.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=8)


def _answered(exc: Exception) -> bool:
    """Whether ``exc`` is the server's own error answer, rather than a lost connection."""
    from mcp import MCPError
    from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

    return isinstance(exc, MCPError) and exc.code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT)


async def _list_tools(client: Any) -> dict[str, ListedTool]:
    tools: dict[str, ListedTool] = {}
    cursor: str | None = None
    for _page in range(100):
        listing = await client.list_tools(cursor=cursor)
        for tool in listing.tools:
            tools[tool.name] = ListedTool(
                name=tool.name,
                input_schema=tool.input_schema,
                output_schema=tool.output_schema,
            )
        cursor = listing.next_cursor
        if not cursor:
            break
    return tools


def _result(name: str, result: Any) -> Any:
    """The tool's answer as a JSON object, or a ``ToolError``."""
    if result.is_error:
        text = " ".join(getattr(c, "text", "") for c in result.content)
        raise ToolError(f"MCP tool {name!r} failed: {text}".strip(), retryable=True)
    if isinstance(result.structured_content, dict):
        return result.structured_content
    for block in result.content:
        block_text = getattr(block, "text", None)
        if isinstance(block_text, str):
            try:
                return json.loads(block_text)
            except json.JSONDecodeError as exc:
                raise ToolError(f"MCP tool {name!r} did not answer JSON", kind="contract") from exc
    raise ToolError(f"MCP tool {name!r} returned no result", kind="contract")
