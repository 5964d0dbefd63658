"""One MCP server kept connected by a supervisor task: start, initialise, list, watch, call; restart with back-off.

Lifecycle of one ``McpConnection``::

    connect (spawn the command / open the HTTP client) → initialize (within startup_timeout_s)
      → tools/list, every page → READY: calls go through; notifications/tools/list_changed → list
        again; a ping every ping_interval_s
      → the stream ends (the process exited), a line that is not JSON-RPC, a transport error,
        a failed ping or listing → DOWN: calls fail at once (``ToolUnavailable``); logged once
        per outage, with the server's name → wait (0.25 s doubling, capped at restart_max_s,
        jittered) → connect again; READY again brings the tools back with no mesh restart

The session speaks the handshake-era protocol (``initialize``, 2025-11-25),
which every MCP server speaks, the SDK's included: there a server's
``notifications/tools/list_changed`` arrives on the session and a cancelled
call sends ``notifications/cancelled``. A call runs in its caller's task
(``call``): the executor's timeout or the caller's cancel cancels the SDK's
request, and the SDK tells the server. Progress notifications of the call go to
the callback given with it. The supervisor alone enters and leaves the
session's contexts (anyio scopes must nest in one task), and it is stopped by
an event, not by cancelling it, so a stdio server is always shut down the SDK's
way (stdin closed, then SIGTERM, then SIGKILL to its process group).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import random
import sys
from collections.abc import Callable
from types import TracebackType
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import CONNECTION_CLOSED, INVALID_PARAMS, METHOD_NOT_FOUND

from services.tools.mcp.config import HttpTransport, McpServerConfig, StdioTransport
from services.tools.registry import ToolError, ToolUnavailable

log = logging.getLogger(__name__)

CLIENT_INFO = types.Implementation(name="agentmesh-tools", version="0.1.0")
#: Most tools/list pages read in one listing (a paginator that never ends must not hang the server's start).
MAX_PAGES = 100
#: Largest SSE event read from a streamable HTTP server (the SDK's default, 1 MiB, would fail a large result
#: instead of letting ``results.cut`` shorten it).
MAX_SSE_EVENT_BYTES = 64 * 1024 * 1024
RESTART_BASE_S = 0.25


class ServerState(enum.Enum):
    STARTING = "starting"
    READY = "ready"
    DOWN = "down"
    CLOSED = "closed"


ToolsListed = Callable[["McpConnection", list[types.Tool]], None]
StateChanged = Callable[["McpConnection"], None]


class _Broken(Exception):
    """The session cannot go on (``reason`` says why, for the one log line)."""


class McpConnection:
    """One configured MCP server (see module docstring). ``on_tools`` gets every listing, ``on_state`` every
    change of ``state``; both run in the supervisor's task and must not block."""

    def __init__(
        self,
        config: McpServerConfig,
        *,
        on_tools: ToolsListed,
        on_state: StateChanged,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.config = config
        self.state = ServerState.STARTING
        self.reason = "starting"
        self.tools: list[types.Tool] = []
        #: Sessions opened after the first one.
        self.restarts = 0
        self._on_tools = on_tools
        self._on_state = on_state
        self._rng = rng
        self._session: ClientSession | None = None
        self._sessions = 0
        self._wake = asyncio.Event()
        self._stopping = False
        self._relist = False
        self._check = False
        self._broken = ""
        self._settled = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        return self.config.name

    def start(self) -> None:
        self._task = asyncio.create_task(self._supervise(), name=f"mcp-{self.name}")

    async def settled(self) -> None:
        """Return once the first connection attempt has ended (READY, or DOWN and restarting)."""
        await self._settled.wait()

    async def close(self, timeout_s: float = 10.0) -> None:
        """Stop the supervisor and shut the server down; cancels it only if it does not stop within ``timeout_s``."""
        self._stopping = True
        self._wake.set()
        task = self._task
        if task is None:
            return
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
        if not done:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def unavailable(self) -> str:
        """Why calls cannot run now ("" when they can). A session seen broken refuses calls at once, before the
        supervisor has finished shutting it down (a stdio server gets seconds to exit)."""
        if self.state is ServerState.READY and not self._broken:
            return ""
        if self.state is ServerState.READY:
            return f"MCP server {self.name} is unavailable ({self._broken}); it is being restarted"
        if self.state is ServerState.STARTING:
            return f"MCP server {self.name} is still starting"
        return f"MCP server {self.name} is unavailable ({self.reason}); it is being restarted"

    async def call(
        self, tool: str, arguments: dict[str, Any], on_progress: ProgressFnT | None = None
    ) -> types.CallToolResult:
        """Call the server's tool ``tool``. ToolUnavailable when the server is down or goes away during the call;
        ToolError when it rejects the call as invalid (unknown tool, bad arguments); other failures raise."""
        session = self._session
        if self.unavailable() or session is None:
            raise ToolUnavailable(self.unavailable() or f"MCP server {self.name} is unavailable")
        try:
            result = await session.call_tool(tool, arguments, progress_callback=on_progress)
        except MCPError as exc:
            if exc.code in (INVALID_PARAMS, METHOD_NOT_FOUND):
                raise ToolError(f"MCP server {self.name} refused the call: {exc.message}") from None
            self._check_soon()
            if exc.code == CONNECTION_CLOSED or self._broken:
                raise ToolUnavailable(f"MCP server {self.name} went away during the call") from None
            raise RuntimeError(f"MCP server {self.name} answered with error {exc.code}: {exc.message}") from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._check_soon()
            raise ToolUnavailable(f"MCP server {self.name} went away during the call") from None
        if not isinstance(result, types.CallToolResult):
            raise RuntimeError(f"MCP server {self.name} answered tools/call with {type(result).__name__}")
        return result

    # -- the supervisor ---------------------------------------------------------

    async def _supervise(self) -> None:
        failures = 0
        while not self._stopping:
            try:
                await self._session_once()
                reason = self._broken or "the connection ended"
            except _Broken as exc:
                reason = str(exc)
            except Exception as exc:  # any failure of one session: the server is down, the executor goes on
                reason = self._broken or _describe(exc)
            self._session = None
            if self._stopping:
                break
            failures = 1 if self.state is ServerState.READY else failures + 1
            self._set_down(reason, failures)
            delay = min(self.config.restart_max_s, RESTART_BASE_S * 2 ** (failures - 1)) * (0.5 + self._rng() / 2)
            with anyio.move_on_after(delay):
                while not self._stopping:
                    self._wake.clear()
                    await self._wake.wait()
        self._set_state(ServerState.CLOSED, "closed")
        self._settled.set()

    async def _session_once(self) -> None:
        """One session from connect to its end; returns when stopping, raises when it breaks."""
        self._broken, self._relist, self._check = "", False, False
        startup = self.config.startup_timeout_s
        async with contextlib.AsyncExitStack() as stack:
            read, write = await self._open(stack)
            session = await stack.enter_async_context(
                ClientSession(
                    _EndWatched(read, self._stream_ended),
                    write,
                    message_handler=self._on_message,
                    client_info=CLIENT_INFO,
                )
            )
            self._sessions += 1
            if self._sessions > 1:
                self.restarts += 1
            try:
                with anyio.fail_after(startup):
                    await session.initialize()
            except TimeoutError:
                raise _Broken(f"it did not initialise within {startup:g} s") from None
            await self._list(session)
            self._session = session
            self._set_up()
            await self._watch(session)

    async def _open(self, stack: contextlib.AsyncExitStack) -> tuple[Any, Any]:
        transport = self.config.transport
        if isinstance(transport, StdioTransport):
            params = StdioServerParameters(
                command=transport.command,
                args=list(transport.args),
                env=dict(transport.env) or None,
                cwd=transport.cwd or None,
            )
            try:
                streams = await stack.enter_async_context(stdio_client(params, errlog=sys.stderr))
            except OSError as exc:
                raise _Broken(f"its command cannot be started: {exc.strerror or exc}") from None
            return streams
        assert isinstance(transport, HttpTransport)
        http = await stack.enter_async_context(create_mcp_http_client(headers=dict(transport.headers)))
        return await stack.enter_async_context(
            streamable_http_client(transport.url, http_client=http, max_sse_event_size=MAX_SSE_EVENT_BYTES)
        )

    async def _watch(self, session: ClientSession) -> None:
        interval = self.config.ping_interval_s
        while True:
            woke = False
            with anyio.move_on_after(interval if interval > 0 else float("inf")):
                await self._wake.wait()
                woke = True
            self._wake.clear()
            if self._stopping:
                return
            if self._broken:
                raise _Broken(self._broken)
            if self._relist:
                self._relist = False
                await self._list(session)
            elif self._check or not woke:
                self._check = False
                try:
                    with anyio.fail_after(self.config.startup_timeout_s):
                        await session.send_ping()
                except TimeoutError:
                    raise _Broken(f"it did not answer a ping within {self.config.startup_timeout_s:g} s") from None
                except MCPError as exc:
                    if exc.code != METHOD_NOT_FOUND:  # a server without ping is alive enough to say so
                        raise _Broken(f"its ping failed: {exc.message}") from None

    async def _list(self, session: ClientSession) -> None:
        tools: list[types.Tool] = []
        cursor: str | None = None
        try:
            with anyio.fail_after(self.config.startup_timeout_s):
                for _ in range(MAX_PAGES):
                    params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                    page = await session.list_tools(params=params)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
                else:
                    log.warning(
                        "MCP server %s lists more than %d pages of tools; the rest are left out", self.name, MAX_PAGES
                    )
        except TimeoutError:
            raise _Broken(f"tools/list did not finish within {self.config.startup_timeout_s:g} s") from None
        except MCPError as exc:
            raise _Broken(f"tools/list failed: {exc.message}") from None
        self.tools = tools
        self._on_tools(self, tools)

    # -- what the session tells us ---------------------------------------------

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            if isinstance(self.config.transport, StdioTransport):
                self._break("it wrote a line to stdout that is not JSON-RPC")
            else:
                self._break(f"its transport failed: {_describe(message)}")
        elif isinstance(message, types.ToolListChangedNotification):
            self._relist = True
            self._wake.set()

    def _stream_ended(self) -> None:
        exited = isinstance(self.config.transport, StdioTransport)
        self._break("its process exited" if exited else "the connection closed")

    def _break(self, reason: str) -> None:
        if not self._broken:
            self._broken = reason
        self._wake.set()

    def _check_soon(self) -> None:
        self._check = True
        self._wake.set()

    # -- state ------------------------------------------------------------------

    def _set_up(self) -> None:
        back = self.state is ServerState.DOWN
        self._set_state(ServerState.READY, "")
        if back:
            log.info("MCP server %s is back: %d tools", self.name, len(self.tools))
        else:
            log.info("MCP server %s (%s) is up: %d tools", self.name, self.config.transport.describe(), len(self.tools))
        self._settled.set()

    def _set_down(self, reason: str, failures: int) -> None:
        first = self.state is not ServerState.DOWN
        self._set_state(ServerState.DOWN, reason)
        if first:
            log.warning(
                "MCP server %s (%s) is down: %s; its tools fail at once as UNAVAILABLE; restarting with back-off",
                self.name,
                self.config.transport.describe(),
                reason,
            )
        else:
            log.debug("MCP server %s: attempt %d failed: %s", self.name, failures, reason)
        self._settled.set()

    def _set_state(self, state: ServerState, reason: str) -> None:
        changed = state is not self.state
        self.state, self.reason = state, reason
        if changed:
            self._on_state(self)


def _describe(exc: BaseException) -> str:
    """One line for a failure (an exception group: its first leaf)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:200] if text else type(exc).__name__


class _EndWatched:
    """The session's read stream, passed through; ``ended`` is called when it ends (the server went away)."""

    def __init__(self, inner: Any, ended: Callable[[], None]) -> None:
        self._inner = inner
        self._ended = ended

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            item: SessionMessage | Exception = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._ended()
            raise
        return item

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _EndWatched:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _EndWatched:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        await self.aclose()
        return None


def quiet_sdk_logs(debug: bool) -> None:
    """The SDK logs a traceback for every bad line and failed stream; ``McpConnection`` logs each outage once, by
    server name, so the SDK's own lines are shown only at debug level."""
    logging.getLogger("mcp").setLevel(logging.DEBUG if debug else logging.CRITICAL)
