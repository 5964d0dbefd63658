"""One tool round of a turn: every planned call at once, events as they happen.

In: the round's ``PlannedCall``s. Out: a ``ToolCallStarted`` per call (all
before any result, since they all start together), then a ``ToolCallFinished``
per call in the order they finish; each result is also appended to the turn's
record and to ``results``. A failed tool is a result like any other (the model
reads the failure); cancelling the round cancels every call still running.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence

from opentelemetry import trace

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from agentmesh.tools.v1 import tools_pb2
from services.router.metrics import RouterMetrics
from services.router.planner import PlannedCall
from services.router.sessions import ToolRecord, TurnRecord
from services.router.tools_link import ToolsLink
from services.runtime.deadline import Deadline
from services.runtime.interceptors.tracing import inject_context


class ToolRound:
    def __init__(
        self,
        tools: ToolsLink,
        *,
        timeout_s: float,
        metrics: RouterMetrics | None = None,
        tracer: trace.Tracer | None = None,
    ) -> None:
        self._tools = tools
        self._timeout_s = timeout_s
        self._metrics = metrics
        self._tracer = tracer or trace.get_tracer("agentmesh.router")

    async def run(  # noqa: PLR0917 - the round's inputs and its three outputs
        self,
        calls: Sequence[PlannedCall],
        turn_id: str,
        round_no: int,
        record: TurnRecord,
        results: list[tools_pb2.ToolResult],
        arguments: dict[str, str],
    ) -> AsyncGenerator[agent_pb2.ConverseResponse, None]:
        timeout = Deadline.current().timeout(cap=self._timeout_s)
        tasks: list[asyncio.Task[tools_pb2.ToolResult]] = []
        for i, call in enumerate(calls):
            call_id = f"{turn_id[:12]}-{round_no}-{i}"
            arguments[call_id] = call.arguments_json
            record.tool_calls.append(ToolRecord(call_id, call.name, call.arguments_json))
            yield agent_pb2.ConverseResponse(
                tool_call_started=agent_pb2.ToolCallStarted(
                    call_id=call_id, tool_name=call.name, arguments_json=call.arguments_json, round=round_no
                )
            )
            tool_call = tools_pb2.ToolCall(call_id=call_id, tool_name=call.name, arguments_json=call.arguments_json)
            if timeout is not None:
                tool_call.timeout.FromNanoseconds(int(timeout * 1e9))
            tasks.append(asyncio.create_task(self._traced_call(tool_call)))
        try:
            for next_done in asyncio.as_completed(tasks):
                result = await next_done
                results.append(result)
                rec = next(r for r in record.tool_calls if r.call_id == result.call_id)
                rec.status, rec.output_json, rec.error_message = (
                    result.status,
                    result.output_json,
                    result.error_message,
                )
                rec.latency_s, rec.cached = result.latency.ToNanoseconds() / 1e9, result.cached
                if self._metrics is not None:
                    self._metrics.tool_calls.labels(
                        result.tool_name, common_pb2.ToolCallStatus.Name(result.status)
                    ).inc()
                yield agent_pb2.ConverseResponse(
                    tool_call_finished=agent_pb2.ToolCallFinished(
                        call_id=result.call_id,
                        tool_name=result.tool_name,
                        status=result.status,
                        output_json=result.output_json,
                        error_message=result.error_message,
                        latency=result.latency,
                        cached=result.cached,
                    )
                )
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        # Results in call order, so the answer's prompt (and its prefix-cache key) do not depend on timing.
        order = {call_id: i for i, call_id in enumerate(arguments)}
        results.sort(key=lambda r: order.get(r.call_id, len(order)))

    async def _traced_call(self, call: tools_pb2.ToolCall) -> tools_pb2.ToolResult:
        with self._tracer.start_as_current_span("agent.tool_call", attributes={"agentmesh.tool": call.tool_name}):
            for k, v in inject_context().items():
                call.trace_context[k] = v
            result = await self._tools.call(call)
            if not result.tool_name:
                result.tool_name = call.tool_name
            return result
