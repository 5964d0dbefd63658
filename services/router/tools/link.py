"""The router's link to the tool executors: one long-lived, multiplexed Execute stream per executor.

``ToolsLink`` takes ``host:port`` (one executor, or a ClusterIP) or
``dns:host:port`` (a headless Service: every pod gets its own stream, and
re-resolving every ``refresh_s`` brings in pods the autoscaler adds; a failed
lookup keeps the last good set, see ``runtime/resolver.py``). Each call goes
to the connected executor with the fewest calls in flight.

``call(tool_call, on_progress)`` waits for that call's result, handing each
progress frame the executor sends before it (an MCP tool's progress) to
``on_progress``; a cancelled caller sends a CancelToolCall (which the executor
passes to an MCP server as ``notifications/cancelled``). If a stream breaks,
its pending calls fail with an UNAVAILABLE result (shown to the model as a
failure, never a crash) and the stream reconnects; while every executor is
``down`` (was connected, went away, not back yet) a call fails the same way at
once, instead of waiting for one to connect as it does at start-up (a turn
during an executor outage would otherwise spend seconds per call waiting).
``list_tools(tenant)`` and
``watch_tools(tenant)`` fetch and follow the tools that tenant may use (the
executor filters by the ``x-agentmesh-tenant`` metadata; no tenant: the tools
open to every tenant); ``lists.py`` keeps them per tenant. Each stream is
a ``runtime/mux_client.py`` link (connected once the executor took the stream,
reconnect with backoff, serialised writes, cancel on caller exit); its channel
lives as long as the stream, since the list calls use it too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

import grpc.aio

from agentmesh.common.v1 import common_pb2
from agentmesh.tools.v1 import tools_pb2, tools_pb2_grpc
from services.runtime.errors import Unavailable
from services.runtime.mux_client import MuxClient, StreamDown
from services.runtime.peers import PeerSet
from services.runtime.resolver import Lookup, Resolver, getaddrinfo_lookup
from services.runtime.tenancy import TENANT_HEADER

log = logging.getLogger(__name__)


ToolResultFuture = asyncio.Future[tools_pb2.ToolResult]
#: Called with each progress frame of a running call, in arrival order, never after its result.
OnProgress = Callable[[tools_pb2.ToolProgress], None]


@dataclass
class PendingCall:
    """One call in flight on a stream: its result to come, and who hears its progress."""

    result: ToolResultFuture
    on_progress: OnProgress | None = None


def tenant_metadata(tenant: str) -> tuple[tuple[str, str], ...]:
    return ((TENANT_HEADER, tenant),) if tenant else ()


class ExecuteStream(MuxClient[tools_pb2.ExecuteRequest, tools_pb2.ExecuteResponse, PendingCall]):
    """One multiplexed Execute stream to one tool executor (see module docstring)."""

    peer = "tool executor"

    def __init__(self, target: str, channel_factory: Callable[[str], grpc.aio.Channel]) -> None:
        self.channel = channel_factory(target)
        super().__init__(target, channel_factory, channel=self.channel)

    def open(
        self, channel: grpc.aio.Channel
    ) -> grpc.aio.StreamStreamCall[tools_pb2.ExecuteRequest, tools_pb2.ExecuteResponse]:
        return tools_pb2_grpc.ToolExecutorServiceStub(channel).Execute(wait_for_ready=True)

    def received(self, message: tools_pb2.ExecuteResponse) -> None:
        if message.HasField("progress"):
            slot = self._slots.get(message.progress.call_id)
            if slot is not None and slot.on_progress is not None and not slot.result.done():
                slot.on_progress(message.progress)
            return
        slot = self._slots.get(message.result.call_id)
        if slot is not None and not slot.result.done():
            slot.result.set_result(message.result)

    def lost(self, why: str, was_connected: bool) -> None:
        for call_id, slot in self._slots.items():
            if not slot.result.done():
                slot.result.set_result(unavailable(call_id, "the tool executor is unavailable"))

    async def list_tools(self, tenant: str = "", timeout_s: float = 5.0) -> tools_pb2.ListToolsResponse:
        stub = tools_pb2_grpc.ToolExecutorServiceStub(self.channel)
        reply: tools_pb2.ListToolsResponse = await stub.ListTools(
            tools_pb2.ListToolsRequest(), metadata=tenant_metadata(tenant), timeout=timeout_s, wait_for_ready=True
        )
        return reply

    def watch_tools(
        self, tenant: str = ""
    ) -> grpc.aio.UnaryStreamCall[tools_pb2.WatchToolsRequest, tools_pb2.WatchToolsResponse]:
        stub = tools_pb2_grpc.ToolExecutorServiceStub(self.channel)
        return stub.WatchTools(tools_pb2.WatchToolsRequest(), metadata=tenant_metadata(tenant), wait_for_ready=True)

    async def call(self, call: tools_pb2.ToolCall, on_progress: OnProgress | None = None) -> tools_pb2.ToolResult:
        if not self.connected:
            return unavailable(call.call_id, "the tool executor is unavailable", call.tool_name)
        future: ToolResultFuture = asyncio.get_running_loop().create_future()
        done = False
        try:
            await self.submit(call.call_id, PendingCall(future, on_progress), tools_pb2.ExecuteRequest(call=call))
            result = await future
            done = True
            return result
        except StreamDown as exc:
            done = True  # never reached the executor: nothing to cancel there
            return unavailable(call.call_id, f"the tool executor is unavailable: {exc}", call.tool_name)
        finally:
            cancel = tools_pb2.CancelToolCall(call_id=call.call_id)
            await self.release(call.call_id, None if done else tools_pb2.ExecuteRequest(cancel=cancel))


class ToolsLink:
    """Every tool executor behind the target, one ``ExecuteStream`` each (see module docstring)."""

    def __init__(
        self,
        target: str,
        channel_factory: Callable[[str], grpc.aio.Channel],
        *,
        refresh_s: float = 10.0,
        lookup: Lookup = getaddrinfo_lookup,
    ) -> None:
        self.target = target
        self._channel_factory = channel_factory
        self._peers = PeerSet(
            Resolver([target], lookup), join=self._join, leave=_leave, refresh_s=refresh_s, what="tool executor"
        )
        self.streams: dict[str, ExecuteStream] = self._peers.peers
        self._resolved = self._peers.found

    def start(self) -> None:
        self._peers.follow(refresh_first=True)

    async def close(self) -> None:
        await self._peers.stop()
        await asyncio.gather(*(s.close() for s in self.streams.values()))

    async def refresh(self) -> None:
        await self._peers.refresh()

    def _join(self, address: str) -> ExecuteStream:
        stream = ExecuteStream(address, self._channel_factory)
        stream.start()
        return stream

    async def _any_stream(self, timeout_s: float) -> ExecuteStream:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._resolved.wait()
        if not self.streams:
            raise Unavailable(f"no tool executor address for {self.target} yet", retry_after_s=1.0)
        return self._pick() or next(iter(self.streams.values()))

    async def list_tools(self, tenant: str = "", timeout_s: float = 5.0) -> tools_pb2.ListToolsResponse:
        """The tools ``tenant`` may use, with their origins and the list's revision."""
        return await (await self._any_stream(timeout_s)).list_tools(tenant, timeout_s)

    async def watch_tools(
        self, tenant: str = "", timeout_s: float = 5.0
    ) -> grpc.aio.UnaryStreamCall[tools_pb2.WatchToolsRequest, tools_pb2.WatchToolsResponse]:
        """The tools ``tenant`` may use, at once and on every change, until the executor drains (the stream
        ends) or the call fails (AioRpcError; UNIMPLEMENTED from an executor without WatchTools)."""
        return (await self._any_stream(timeout_s)).watch_tools(tenant)

    @property
    def down(self) -> bool:
        """Every executor known was connected and went away (``MuxClient.down``): calls fail at once."""
        return bool(self.streams) and all(s.down for s in self.streams.values())

    def _pick(self) -> ExecuteStream | None:
        connected = [s for s in self.streams.values() if s.connected]
        return min(connected, key=lambda s: s.in_flight, default=None)

    async def call(
        self, call: tools_pb2.ToolCall, on_progress: OnProgress | None = None, connect_within_s: float = 5.0
    ) -> tools_pb2.ToolResult:
        stream = self._pick()
        if stream is None and not self.down:  # wait for an executor that is starting, not for one that went away
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(connect_within_s):
                    await self._resolved.wait()
                    waits = [asyncio.ensure_future(s.wait_connected()) for s in self.streams.values()]
                    try:
                        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        for w in waits:
                            w.cancel()
            stream = self._pick()
        if stream is None:
            return unavailable(call.call_id, "the tool executor is unavailable", call.tool_name)
        return await stream.call(call, on_progress)


async def _leave(address: str, stream: ExecuteStream) -> None:
    await stream.close()


def unavailable(call_id: str, why: str, tool_name: str = "") -> tools_pb2.ToolResult:
    return tools_pb2.ToolResult(
        call_id=call_id,
        tool_name=tool_name,
        status=common_pb2.TOOL_CALL_STATUS_UNAVAILABLE,
        error_message=why,
    )
