"""One agent turn: load the session → plan → run tools in parallel → answer → record.

In: a ``TurnRequest``. Out: the turn's events as ``ConverseResponse`` messages,
in the order the client sees them (TurnAccepted; per round, ToolCallStarted
for each planned call, then ToolCallFinished as each finishes; TextDelta as the
answer streams; TurnCompleted). The completed turn is appended to the session
log; a turn id already in the log is replayed from it, not run again.

Plan→act rounds are bounded (``max_tool_rounds``); a round that plans only
calls already made ends the loop. A failed tool is shown to the model as a
failure, never an error of the turn. Cancelling the task that runs the turn
(client cancel, disconnect, deadline) cancels the generation and the tool
calls in flight.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass

from opentelemetry import trace

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from agentmesh.tools.v1 import tools_pb2
from services.router.generation import GenerationDone, GenerationSpec, Generator
from services.router.metrics import RouterMetrics
from services.router.planner import (
    PlannedCall,
    choose_messages,
    choose_schema,
    fill_messages,
    grounded,
    parse_arguments,
    parse_choice,
)
from services.router.prompt import (
    DEFAULT_SYSTEM_PROMPT,
    PastTurn,
    answer_messages,
    history_messages,
    tool_results_message,
)
from services.router.sessions import Session, SessionStore, ToolRecord, TurnRecord
from services.router.tools_link import ToolsLink
from services.runtime.deadline import Deadline
from services.runtime.interceptors.tracing import inject_context
from services.runtime.protoutil import duration

log = logging.getLogger(__name__)

MODES = {
    agent_pb2.TOOL_CHOICE_MODE_UNSPECIFIED: "auto",
    agent_pb2.TOOL_CHOICE_MODE_AUTO: "auto",
    agent_pb2.TOOL_CHOICE_MODE_NONE: "none",
    agent_pb2.TOOL_CHOICE_MODE_REQUIRED: "required",
    agent_pb2.TOOL_CHOICE_MODE_NAMED: "named",
}


@dataclass(frozen=True)
class TurnRequest:
    tenant: str
    start: agent_pb2.StartTurn
    request_id: str
    queued_s: float = 0.0


@dataclass(frozen=True)
class LoopSettings:
    default_max_tool_rounds: int = 2
    history_budget_tokens: int = 1200
    plan_max_tokens: int = 160
    answer_max_tokens: int = 256
    tool_timeout_s: float = 10.0


class AgentLoop:
    def __init__(
        self,
        generator: Generator,
        tools: ToolsLink,
        sessions: SessionStore,
        *,
        settings: LoopSettings = LoopSettings(),
        metrics: RouterMetrics | None = None,
        tracer: trace.Tracer | None = None,
    ) -> None:
        self._generator = generator
        self._tools = tools
        self._sessions = sessions
        self._settings = settings
        self._metrics = metrics
        self._tracer = tracer or trace.get_tracer("agentmesh.router")
        self._tool_specs: list[common_pb2.ToolSpec] | None = None

    async def tool_specs(self) -> list[common_pb2.ToolSpec]:
        if self._tool_specs is None:
            self._tool_specs = await self._tools.list_tools()
        return self._tool_specs

    async def run(self, req: TurnRequest) -> AsyncGenerator[agent_pb2.ConverseResponse, None]:
        start = req.start
        turn_start = time.perf_counter()
        with self._tracer.start_as_current_span("agent.turn") as span:
            session = await self._load_or_create(req)
            turn_id = start.turn_id or uuid.uuid4().hex
            span.set_attribute("agentmesh.session_id", session.session_id)
            span.set_attribute("agentmesh.turn_id", turn_id)
            trace_id = format(span.get_span_context().trace_id, "032x")
            yield agent_pb2.ConverseResponse(
                turn_accepted=agent_pb2.TurnAccepted(
                    session_id=session.session_id,
                    turn_id=turn_id,
                    request_id=req.request_id,
                    trace_id=trace_id,
                )
            )
            recorded = session.turn(turn_id)
            if recorded is not None:  # a retry of a completed turn: replay, do not run or append again
                async for event in self._replay(recorded):
                    yield event
                return
            async for event in self._run_turn(req, session, turn_id, turn_start):
                yield event

    async def _load_or_create(self, req: TurnRequest) -> Session:
        sid = req.start.session_id
        if sid:
            session = await self._sessions.load(req.tenant, sid)
            if session is not None:
                return session
        return Session(
            tenant=req.tenant,
            session_id=sid or uuid.uuid4().hex,
            system_prompt=req.start.system_prompt or DEFAULT_SYSTEM_PROMPT,
            created_at=time.time(),
        )

    async def _run_turn(
        self, req: TurnRequest, session: Session, turn_id: str, turn_start: float
    ) -> AsyncGenerator[agent_pb2.ConverseResponse, None]:
        start = req.start
        s = self._settings
        record = TurnRecord(turn_id=turn_id, user_message=start.message)
        history = history_messages([PastTurn(t.user_message, t.answer) for t in session.turns], s.history_budget_tokens)
        mode = MODES.get(start.tool_choice.mode, "auto")
        usage = common_pb2.Usage()
        results: list[tools_pb2.ToolResult] = []
        arguments: dict[str, str] = {}
        planning_s = tools_s = 0.0
        rounds = 0
        if mode != "none":
            specs = await self.tool_specs()
            done_calls: set[tuple[str, str]] = set()
            max_rounds = start.max_tool_rounds or s.default_max_tool_rounds
            while rounds < max_rounds and specs:
                t0 = time.perf_counter()
                previous = tool_results_message(results, arguments) if results else None
                round_mode = mode if rounds == 0 else "auto"
                calls = await self._plan(
                    specs,
                    start.message,
                    previous,
                    round_mode,
                    start.tool_choice.tool_name,
                    start.priority,
                    usage,
                )
                planning_s += time.perf_counter() - t0
                calls = [c for c in calls if (c.name, c.arguments_json) not in done_calls]
                if not calls:
                    break
                rounds += 1
                t0 = time.perf_counter()
                async for event in self._run_tools(calls, turn_id, rounds, record, results, arguments):
                    yield event
                tools_s += time.perf_counter() - t0
                done_calls |= {(c.name, c.arguments_json) for c in calls}

        t0 = time.perf_counter()
        extra = [tool_results_message(results, arguments)] if results else []
        messages = answer_messages(session.system_prompt, history, start.message, extra)
        sampling = common_pb2.SamplingParams()
        sampling.CopyFrom(start.sampling)
        if not sampling.HasField("temperature"):
            sampling.temperature = 0.0
        if not sampling.HasField("max_tokens"):
            sampling.max_tokens = s.answer_max_tokens
        done: GenerationDone | None = None
        ttft = 0.0
        with self._tracer.start_as_current_span("agent.answer") as span:
            spec = GenerationSpec(
                messages,
                sampling,
                start.priority or common_pb2.PRIORITY_P1,
                sampling_field="start_turn.sampling",
            )
            async for piece in self._generator.stream(spec):
                if piece.text:
                    if not record.answer:
                        ttft = time.perf_counter() - turn_start
                        if self._metrics is not None:
                            self._metrics.ttft.observe(ttft)
                    record.answer += piece.text
                    yield agent_pb2.ConverseResponse(text_delta=agent_pb2.TextDelta(text=piece.text))
                if piece.done is not None:
                    done = piece.done
            assert done is not None
            self._annotate(span, done)
        answering_s = time.perf_counter() - t0
        self._add_usage(usage, done)
        total = time.perf_counter() - turn_start
        record.usage = {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "cached_prompt_tokens": usage.cached_prompt_tokens,
        }
        record.finish_reason = done.finish_reason
        record.completed_at = time.time()
        await self._sessions.append_turn(session, record)
        if self._metrics is not None:
            self._metrics.turns.labels("completed").inc()
            self._metrics.turn_seconds.observe(total)
            for step, secs in (("planning", planning_s), ("tools", tools_s), ("answering", answering_s)):
                self._metrics.step_seconds.labels(step).observe(secs)
        yield agent_pb2.ConverseResponse(
            turn_completed=agent_pb2.TurnCompleted(
                turn_id=turn_id,
                usage=usage,
                finish_reason=done.finish_reason,
                time_to_first_token=duration(ttft),
                timings=agent_pb2.TurnTimings(
                    queued=duration(req.queued_s),
                    planning=duration(planning_s),
                    tools=duration(tools_s),
                    answering=duration(answering_s),
                    total=duration(total),
                ),
                cached=done.cached,
                tool_rounds=rounds,
            )
        )

    async def _plan(  # noqa: PLR0917 - private, one caller
        self,
        specs: Sequence[common_pb2.ToolSpec],
        message: str,
        previous: tuple[str, str] | None,
        mode: str,
        named: str,
        priority: common_pb2.Priority.ValueType,
        usage: common_pb2.Usage,
    ) -> list[PlannedCall]:
        """Step 1 (choose tools) unless a tool is named, then step 2 (fill arguments) for each, concurrently."""
        with self._tracer.start_as_current_span("agent.plan") as span:
            if mode == "named":
                names = [named]
            else:
                schema = json.dumps(choose_schema(specs, mode), sort_keys=True)
                text = await self._structured(choose_messages(specs, message, previous), schema, priority, usage, 48)
                names = parse_choice(text, specs)
            by_name = {t.name: t for t in specs}
            fills = [
                self._structured(fill_messages(by_name[name], message), by_name[name].parameters_json_schema,
                                 priority, usage, self._settings.plan_max_tokens)
                for name in names
            ]  # fmt: skip
            calls = []
            for name, text in zip(names, await asyncio.gather(*fills), strict=True):
                arguments = parse_arguments(text)
                if arguments is None:
                    continue
                call = PlannedCall(name, arguments)
                if grounded(call, message):
                    calls.append(call)
                else:
                    log.info("dropped planned call %s%s: a number in it is not in the message", name, text)
            span.set_attribute("agentmesh.planned_calls", [c.name for c in calls])
            return calls

    async def _structured(
        self,
        messages: list[tuple[str, str]],
        schema: str,
        priority: common_pb2.Priority.ValueType,
        usage: common_pb2.Usage,
        max_tokens: int,
    ) -> str:
        """One greedy generation constrained to ``schema``; its full text."""
        with self._tracer.start_as_current_span("agent.generation") as span:
            spec = GenerationSpec(
                messages,
                common_pb2.SamplingParams(temperature=0.0, max_tokens=max_tokens),
                priority or common_pb2.PRIORITY_P1,
                json_schema=schema,
            )
            text = ""
            done: GenerationDone | None = None
            async for event in self._generator.stream(spec):
                text += event.text
                done = event.done or done
            assert done is not None
            self._annotate(span, done)
            self._add_usage(usage, done)
            return text

    async def _run_tools(  # noqa: PLR0917 - private, one caller
        self,
        calls: Sequence[PlannedCall],
        turn_id: str,
        round_no: int,
        record: TurnRecord,
        results: list[tools_pb2.ToolResult],
        arguments: dict[str, str],
    ) -> AsyncGenerator[agent_pb2.ConverseResponse, None]:
        timeout = Deadline.current().timeout(cap=self._settings.tool_timeout_s)
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

    async def _traced_call(self, call: tools_pb2.ToolCall) -> tools_pb2.ToolResult:
        with self._tracer.start_as_current_span("agent.tool_call", attributes={"agentmesh.tool": call.tool_name}):
            for k, v in inject_context().items():
                call.trace_context[k] = v
            result = await self._tools.call(call)
            if not result.tool_name:
                result.tool_name = call.tool_name
            return result

    @staticmethod
    def _annotate(span: trace.Span, done: GenerationDone) -> None:
        span.set_attribute("agentmesh.replica", done.replica)
        span.set_attribute("agentmesh.replica_reason", done.reason)
        span.set_attribute("agentmesh.cached_prompt_tokens", done.usage.cached_prompt_tokens)
        span.set_attribute("agentmesh.response_cached", done.cached)
        span.set_attribute("agentmesh.failovers", done.failovers)

    def _add_usage(self, usage: common_pb2.Usage, done: GenerationDone) -> None:
        usage.prompt_tokens += done.usage.prompt_tokens
        usage.completion_tokens += done.usage.completion_tokens
        usage.cached_prompt_tokens += done.usage.cached_prompt_tokens
        if self._metrics is not None:
            self._metrics.prompt_tokens.inc(done.usage.prompt_tokens)
            self._metrics.cached_prompt_tokens.inc(done.usage.cached_prompt_tokens)

    async def _replay(self, turn: TurnRecord) -> AsyncGenerator[agent_pb2.ConverseResponse, None]:
        for t in turn.tool_calls:
            yield agent_pb2.ConverseResponse(
                tool_call_started=agent_pb2.ToolCallStarted(
                    call_id=t.call_id, tool_name=t.tool_name, arguments_json=t.arguments_json, round=1
                )
            )
            yield agent_pb2.ConverseResponse(
                tool_call_finished=agent_pb2.ToolCallFinished(
                    call_id=t.call_id,
                    tool_name=t.tool_name,
                    status=t.status,  # type: ignore[arg-type]
                    output_json=t.output_json,
                    error_message=t.error_message,
                    latency=duration(t.latency_s),
                    cached=t.cached,
                )
            )
        if turn.answer:
            yield agent_pb2.ConverseResponse(text_delta=agent_pb2.TextDelta(text=turn.answer))
        yield agent_pb2.ConverseResponse(
            turn_completed=agent_pb2.TurnCompleted(
                turn_id=turn.turn_id,
                usage=common_pb2.Usage(**turn.usage),
                finish_reason=turn.finish_reason,  # type: ignore[arg-type]
                cached=True,
                tool_rounds=1 if turn.tool_calls else 0,
            )
        )
