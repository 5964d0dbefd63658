"""One Execute stream: tool calls multiplexed by call id, results out of order as they finish.

Each ToolCall becomes a request of ``runtime/mux_server.py`` (its own task,
keyed by call id) running ``ToolExecutor.execute``; its outcome is written as
soon as it exists. A CancelToolCall cancels that task and reports CANCELLED; a
caller that goes away cancels every task; a caller that half-closes gets the
results of calls still running, then the stream ends. A call with an empty or
duplicate id is answered at once with INVALID_ARGUMENT and never runs.

Progress a call's tool reports (an MCP server's notifications) goes out as a
progress frame keyed by the call id. Only the newest progress of a call waits
for the stream (a slow reader skips the ones in between, never blocks the tool),
and a call's pending progress is dropped once its result exists, so no progress
frame ever follows the result.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

from opentelemetry import trace
from opentelemetry.context import Context

from agentmesh.tools.v1 import tools_pb2
from services.runtime.interceptors.tracing import extract_context
from services.runtime.mux_server import MuxServer
from services.tools.calls import CallOutcome, CallProgress, CallRequest, CallStatus
from services.tools.convert import outcome_to_proto, progress_to_proto, request_from_proto
from services.tools.executor import ToolExecutor

Write = Callable[[tools_pb2.ExecuteResponse], Awaitable[None]]


class ExecuteSession(MuxServer[tools_pb2.ExecuteRequest, tools_pb2.ExecuteResponse]):
    """See module docstring. One instance per Execute call."""

    def __init__(self, executor: ToolExecutor, write: Write, tracer: trace.Tracer | None = None) -> None:
        super().__init__(write, name="tool")
        self._tracer = tracer or trace.get_tracer("agentmesh.tools")
        self._executor = executor
        self._progress: dict[str, tuple[str, CallProgress]] = {}  # newest unsent progress per call id
        self._writers: set[asyncio.Task[None]] = set()

    async def run(self, requests: AsyncIterator[tools_pb2.ExecuteRequest]) -> None:
        try:
            await super().run(requests)
        finally:
            for writer in list(self._writers):
                writer.cancel()
            await asyncio.gather(*self._writers, return_exceptions=True)

    async def received(self, message: tools_pb2.ExecuteRequest) -> None:
        action = message.WhichOneof("action")
        if action == "call":
            await self._start(message.call)
        elif action == "cancel":
            self.cancel(message.cancel.call_id)

    def failed(self, request_id: str, error: Exception) -> tools_pb2.ExecuteResponse:
        outcome = CallOutcome(request_id, "", CallStatus.FAILED, error_message="internal error")
        return tools_pb2.ExecuteResponse(result=outcome_to_proto(outcome))

    async def _start(self, call: tools_pb2.ToolCall) -> None:
        request = request_from_proto(call)
        if not call.call_id or self.is_live(call.call_id):
            why = "call_id must not be empty" if not call.call_id else "call_id duplicates a live call"
            bad = CallOutcome(
                call.call_id,
                call.tool_name,
                CallStatus.INVALID_ARGUMENT,
                error_message=why,
                error_field="call_id",
            )
            await self.send(tools_pb2.ExecuteResponse(result=outcome_to_proto(bad)))
            return
        parent = extract_context(dict(call.trace_context))
        self.start(call.call_id, self._traced(request, parent))

    async def _traced(self, request: CallRequest, parent: Context) -> tools_pb2.ExecuteResponse:
        """The call under its own span, a child of the caller's per-call trace context."""
        attributes = {"agentmesh.tool": request.tool_name, "agentmesh.call_id": request.call_id}
        tool = self._executor.registry.get(request.tool_name)
        if tool is not None and tool.server:
            attributes["agentmesh.mcp_server"] = tool.server
        with self._tracer.start_as_current_span("tool.execute", context=parent, attributes=attributes) as span:
            try:
                outcome = await self._run(request)
            finally:
                self._progress.pop(request.call_id, None)
            span.set_attribute("agentmesh.tool_status", outcome.status.value)
        return tools_pb2.ExecuteResponse(result=outcome_to_proto(outcome))

    def _progress_sink(self, request: CallRequest) -> Callable[[CallProgress], None]:
        def report(progress: CallProgress) -> None:
            first = request.call_id not in self._progress
            self._progress[request.call_id] = (request.tool_name, progress)
            if first and self.is_live(request.call_id):
                writer = asyncio.create_task(self._send_progress(request.call_id))
                self._writers.add(writer)
                writer.add_done_callback(self._writers.discard)

        return report

    async def _send_progress(self, call_id: str) -> None:
        def build() -> tools_pb2.ExecuteResponse | None:
            pending = self._progress.pop(call_id, None)
            if pending is None:
                return None  # the result went first
            tool_name, progress = pending
            return tools_pb2.ExecuteResponse(progress=progress_to_proto(call_id, tool_name, progress))

        await self.send_built(build)

    async def _run(self, request: CallRequest) -> CallOutcome:
        try:
            return await self._executor.execute(request, on_progress=self._progress_sink(request))
        except asyncio.CancelledError:
            if not self.cancelled(request.call_id):
                raise  # the stream is going away; nobody to tell
            return CallOutcome(
                request.call_id,
                request.tool_name,
                CallStatus.CANCELLED,
                error_message="cancelled by the caller",
            )
