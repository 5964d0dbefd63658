"""One long-lived, multiplexed Execute stream to the tool executor.

``call(tool_call)`` waits for that call's result; a cancelled caller sends a
CancelToolCall. If the stream breaks, pending calls fail with an UNAVAILABLE
result (shown to the model as a failure, never a crash) and the link
reconnects. ``list_tools()`` fetches the registry (for the plan schema).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import grpc
import grpc.aio

from agentmesh.common.v1 import common_pb2
from agentmesh.tools.v1 import tools_pb2, tools_pb2_grpc
from services.runtime.resilience import full_jitter_backoff

log = logging.getLogger(__name__)


class ToolsLink:
    def __init__(self, target: str, channel_factory: Callable[[str], grpc.aio.Channel]) -> None:
        self.target = target
        self._channel = channel_factory(target)
        self._pending: dict[str, asyncio.Future[tools_pb2.ToolResult]] = {}
        self._call: Any = None
        self._connected = asyncio.Event()
        self._writing = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._maintain(), name="tools-link")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._channel.close()

    async def list_tools(self, timeout_s: float = 5.0) -> list[common_pb2.ToolSpec]:
        stub = tools_pb2_grpc.ToolExecutorServiceStub(self._channel)
        reply = await stub.ListTools(tools_pb2.ListToolsRequest(), timeout=timeout_s, wait_for_ready=True)
        return list(reply.tools)

    async def _maintain(self) -> None:
        attempt = 0
        while True:
            try:
                self._call = tools_pb2_grpc.ToolExecutorServiceStub(self._channel).Execute(wait_for_ready=True)
                self._connected.set()
                attempt = 0
                async for message in self._call:
                    future = self._pending.pop(message.result.call_id, None)
                    if future is not None and not future.done():
                        future.set_result(message.result)
                raise ConnectionError("stream ended")
            except asyncio.CancelledError:
                raise
            except (grpc.aio.AioRpcError, ConnectionError) as exc:
                log.warning("tool executor stream lost: %s", exc)
            finally:
                self._connected.clear()
                for call_id, future in list(self._pending.items()):
                    if not future.done():
                        future.set_result(unavailable(call_id, "the tool executor is unavailable"))
                self._pending.clear()
            attempt += 1
            await asyncio.sleep(full_jitter_backoff(attempt, base_s=0.1, cap_s=2.0))

    async def call(self, call: tools_pb2.ToolCall, connect_within_s: float = 5.0) -> tools_pb2.ToolResult:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._connected.wait(), connect_within_s)
        if not self._connected.is_set():
            return unavailable(call.call_id, "the tool executor is unavailable", call.tool_name)
        future: asyncio.Future[tools_pb2.ToolResult] = asyncio.get_running_loop().create_future()
        self._pending[call.call_id] = future
        try:
            async with self._writing:
                await self._call.write(tools_pb2.ExecuteRequest(call=call))
            return await future
        except asyncio.CancelledError:
            if self._connected.is_set():
                with contextlib.suppress(Exception):
                    async with self._writing:
                        await self._call.write(
                            tools_pb2.ExecuteRequest(cancel=tools_pb2.CancelToolCall(call_id=call.call_id))
                        )
            raise
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError) as exc:
            return unavailable(call.call_id, f"the tool executor is unavailable: {exc}", call.tool_name)
        finally:
            self._pending.pop(call.call_id, None)


def unavailable(call_id: str, why: str, tool_name: str = "") -> tools_pb2.ToolResult:
    return tools_pb2.ToolResult(
        call_id=call_id,
        tool_name=tool_name,
        status=common_pb2.TOOL_CALL_STATUS_UNAVAILABLE,
        error_message=why,
    )
