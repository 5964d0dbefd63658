"""One Execute stream: tool calls multiplexed by call id, results out of order as they finish.

Each ToolCall becomes a task running ``ToolExecutor.execute``; its outcome is
written as soon as it exists (one write at a time: grpc.aio allows a single
write in flight per call). A CancelToolCall cancels that task and reports
CANCELLED; a caller that goes away cancels every task; a caller that
half-closes gets the results of calls still running, then the stream ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from opentelemetry import trace

from agentmesh.tools.v1 import tools_pb2
from services.runtime.interceptors.tracing import extract_context
from services.tools.convert import outcome_to_proto, request_from_proto
from services.tools.executor import CallOutcome, CallRequest, CallStatus, ToolExecutor

log = logging.getLogger(__name__)

Write = Callable[[tools_pb2.ExecuteResponse], Awaitable[None]]


class ExecuteSession:
    def __init__(self, executor: ToolExecutor, write: Write, tracer: trace.Tracer | None = None) -> None:
        self._tracer = tracer or trace.get_tracer("agentmesh.tools")
        self._executor = executor
        self._write = write
        self._writing = asyncio.Lock()
        self._live: dict[str, asyncio.Task[None]] = {}
        self._cancelled: set[str] = set()

    async def run(self, requests: AsyncIterator[tools_pb2.ExecuteRequest]) -> None:
        try:
            async for message in requests:
                action = message.WhichOneof("action")
                if action == "call":
                    await self._start(message.call)
                elif action == "cancel":
                    self._cancel(message.cancel.call_id)
            while self._live:
                await asyncio.gather(*self._live.values(), return_exceptions=True)
        finally:
            tasks = list(self._live.values())
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _start(self, call: tools_pb2.ToolCall) -> None:
        request = request_from_proto(call)
        if not call.call_id or call.call_id in self._live:
            why = "call_id must not be empty" if not call.call_id else "call_id duplicates a live call"
            bad = CallOutcome(
                call.call_id,
                call.tool_name,
                CallStatus.INVALID_ARGUMENT,
                error_message=why,
                error_field="call_id",
            )
            await self._send(bad)
            return
        parent = extract_context(dict(call.trace_context))
        self._live[call.call_id] = asyncio.create_task(self._traced(request, parent), name=f"tool-{call.call_id}")

    async def _traced(self, request: CallRequest, parent: Any) -> None:
        """The call under its own span, a child of the caller's per-call trace context."""
        attributes = {"agentmesh.tool": request.tool_name, "agentmesh.call_id": request.call_id}
        with self._tracer.start_as_current_span("tool.execute", context=parent, attributes=attributes):
            await self._run(request)

    def _cancel(self, call_id: str) -> None:
        task = self._live.get(call_id)
        if task is not None:
            self._cancelled.add(call_id)
            task.cancel()

    async def _run(self, request: CallRequest) -> None:
        try:
            outcome = await self._executor.execute(request)
        except asyncio.CancelledError:
            if request.call_id not in self._cancelled:
                raise
            outcome = CallOutcome(
                request.call_id,
                request.tool_name,
                CallStatus.CANCELLED,
                error_message="cancelled by the caller",
            )
        finally:
            self._live.pop(request.call_id, None)
            self._cancelled.discard(request.call_id)
        await self._send(outcome)

    async def _send(self, outcome: CallOutcome) -> None:
        async with self._writing:
            await self._write(tools_pb2.ExecuteResponse(result=outcome_to_proto(outcome)))
