"""One tool round of a turn: every planned call at once, events as they happen.

In: the round's ``PlannedCall``s. Out: a ``ToolCallStarted`` per call (all
before any result, since they all start together), then a ``ToolCallFinished``
per call in the order they finish, each preceded by the ``ToolCallProgress``
the call reported while it ran (an MCP tool's progress: the newest of each
call when several arrive between two sends, never one after the call's
result); each result is also written to the turn's
record and to its ``ToolResults`` (what the answer and a replan read). A failed
tool is a result like any other (the model reads the failure); cancelling the
round cancels every call still running.

A call of one of the turn's client tools (``client_tools.py``, beside this file) is not sent to
the executor: after every ToolCallStarted, one ClientToolCalls hands those calls
to the client, and each waits in the turn's mailbox for its result, which then
finishes like a server call's; with ``end_at`` the round hands them out and
waits only for its server calls (the turn ends there). Their metrics are
labelled ``(client)``: client tool names are the client's strings, unbounded.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from agentmesh.tools.v1 import tools_pb2
from services.router.metrics import RouterMetrics
from services.router.planning.inputs import PlannedCall
from services.router.serving.convert import finished_event, progress_event, record_result, started_event
from services.router.sessions.records import ToolRecord, TurnRecord
from services.router.tools.link import OnProgress, ToolsLink
from services.router.turn.client_tools import ClientCalls, prior_results
from services.runtime.deadline import Deadline
from services.runtime.interceptors.tracing import inject_context


@dataclass
class ToolResults:
    """What a turn's tool rounds returned: results in call order, and each call's arguments by call id."""

    results: list[tools_pb2.ToolResult] = field(default_factory=list)
    arguments: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ClientTools:
    """A turn's client tools for its rounds: their names, the mailbox, and whether the turn ends at them."""

    names: frozenset[str]
    calls: ClientCalls
    end_at: bool = False


#: The tool label of client calls' metrics.
CLIENT_TOOL_LABEL = "(client)"


@dataclass
class _Progress:
    """The round's progress frames not sent yet: the newest per call (bounded by the round's calls)."""

    pending: dict[str, tools_pb2.ToolProgress] = field(default_factory=dict)
    finished: set[str] = field(default_factory=set)
    wake: asyncio.Event = field(default_factory=asyncio.Event)

    def heard(self, frame: tools_pb2.ToolProgress) -> None:
        if frame.call_id not in self.finished:
            self.pending[frame.call_id] = frame
            self.wake.set()

    def take(self) -> list[tools_pb2.ToolProgress]:
        self.wake.clear()
        frames = [f for call_id, f in self.pending.items() if call_id not in self.finished]
        self.pending.clear()
        return frames


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

    async def run(
        self,
        calls: Sequence[PlannedCall],
        round_no: int,
        record: TurnRecord,
        out: ToolResults,
        client: ClientTools | None = None,
    ) -> AsyncGenerator[agent_pb2.ConverseResponse, None]:
        """Round ``round_no`` of ``record``'s turn: its events; results into ``record`` and ``out``."""
        results, arguments = out.results, out.arguments
        timeout = Deadline.current().timeout(cap=self._timeout_s)
        tasks: list[asyncio.Task[tools_pb2.ToolResult]] = []
        handed: list[tools_pb2.ToolCall] = []
        progress = _Progress()
        for i, call in enumerate(calls):
            call_id = f"{record.turn_id[:12]}-{round_no}-{i}"
            arguments[call_id] = call.arguments_json
            client_side = client is not None and call.name in client.names
            call_record = ToolRecord(call_id, call.name, call.arguments_json, client_side=client_side)
            record.tool_calls.append(call_record)
            yield started_event(call_record, round_no)
            tool_call = tools_pb2.ToolCall(call_id=call_id, tool_name=call.name, arguments_json=call.arguments_json)
            if client_side:
                handed.append(tool_call)
                continue
            if timeout is not None:
                tool_call.timeout.FromNanoseconds(int(timeout * 1e9))
            tasks.append(asyncio.create_task(self._traced_call(tool_call, progress.heard)))
        if client is not None and handed:
            yield client.calls.handed_out(round_no, handed)
            if not client.end_at:
                tasks += [asyncio.create_task(client.calls.result(c)) for c in handed]
        try:
            running = set(tasks)
            while running:
                heard = asyncio.ensure_future(progress.wake.wait())
                waits: list[asyncio.Future[Any]] = [*running, heard]
                try:
                    done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    heard.cancel()
                for frame in progress.take():
                    yield progress_event(frame)
                for task in tasks:  # in call order, when several finish at once
                    if task not in done or task not in running:
                        continue
                    running.discard(task)
                    result = task.result()
                    progress.finished.add(result.call_id)
                    results.append(result)
                    rec = next(r for r in record.tool_calls if r.call_id == result.call_id)
                    record_result(rec, result)
                    if self._metrics is not None:
                        label = CLIENT_TOOL_LABEL if rec.client_side else result.tool_name
                        self._metrics.tool_calls.labels(label, common_pb2.ToolCallStatus.Name(result.status)).inc()
                    yield finished_event(rec, result.latency)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        # Results in call order, so the answer's prompt (and its prefix-cache key) do not depend on timing.
        order = {call_id: i for i, call_id in enumerate(arguments)}
        results.sort(key=lambda r: order.get(r.call_id, len(order)))

    async def _traced_call(self, call: tools_pb2.ToolCall, on_progress: OnProgress) -> tools_pb2.ToolResult:
        with self._tracer.start_as_current_span("agent.tool_call", attributes={"agentmesh.tool": call.tool_name}):
            for k, v in inject_context().items():
                call.trace_context[k] = v
            result = await self._tools.call(call, on_progress)
            if not result.tool_name:
                result.tool_name = call.tool_name
            return result


def per_round(calls: list[PlannedCall], start: agent_pb2.StartTurn) -> list[PlannedCall]:
    """The calls one round makes: with prior client results, only the mesh's; at most max_calls_per_round."""
    if start.prior_tool_calls:
        client = {t.name for t in start.client_tools}
        calls = [c for c in calls if c.name not in client]
    return calls[: start.max_calls_per_round] if start.max_calls_per_round else calls


def take_prior(start: agent_pb2.StartTurn, record: TurnRecord, out: ToolResults) -> None:
    """The client's calls already made for this message, into the turn's record and results."""
    for result, prior in zip(prior_results(start), start.prior_tool_calls, strict=True):
        call = ToolRecord(prior.call_id, prior.tool_name, prior.arguments_json or "{}", client_side=True)
        record_result(call, result)
        record.tool_calls.append(call)
        out.results.append(result)
        out.arguments[prior.call_id] = call.arguments_json
