"""One agent turn: load the session → select and fill tools → run them in parallel → answer → record.

In: a ``TurnRequest`` and the turn's ``TurnProgress``. Out: the turn's events
as ``ConverseResponse`` messages, in the order the client sees them
(TurnAccepted; per round, ToolCallStarted for each planned call, then
ToolCallFinished as each finishes; TextDelta, with the turn id, as the answer
streams; TurnCompleted with usage, generations and how tools were selected).
The completed turn is appended to the session log; a turn id already in the
log is replayed from it, not run again. The loop records what it has done in
the progress as it goes, so a turn that stops early still ends with a
TurnCompleted (``converse.py`` sends that one; ``turn_events.py`` builds both).

The concerns live next door: ``planning.py`` (which tools, their arguments),
``tool_round.py`` (running a round), ``prompt.py`` (the answer's messages).
After a successful tool round the turn answers: with embedding selection every
ask of the message was selected up front, so there is nothing left to plan;
LLM selection (``--tool-selection llm``, kept for comparison) chooses again with
the results, bounded by ``max_tool_rounds``, as the previous path did.

The answer's prompt carries the results as tool messages and, when every tool
wrote a summary, opens with those summaries (``prompt.answer_opening``): the
client sees the tools' own numbers at once, and the model continues from them.
Cancelling the task that runs the turn (client cancel, disconnect, deadline)
cancels the generation and the tool calls in flight.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass

import grpc.aio
from opentelemetry import trace

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from agentmesh.tools.v1 import tools_pb2
from services.router.generation import GenerationDone, GenerationSpec, Generator
from services.router.metrics import RouterMetrics
from services.router.planning import PlanInput, Planner, annotate
from services.router.prompt import (
    DEFAULT_SYSTEM_PROMPT,
    PastTurn,
    answer_messages,
    answer_opening,
    history_cut,
    render_history,
    results_text,
    tool_messages,
)
from services.router.sessions import Session, SessionStore, TurnRecord
from services.router.tool_round import ToolRound
from services.router.tools_link import ToolsLink
from services.router.turn_events import TurnProgress, accepted, completed, replay, text_delta
from services.runtime.errors import NotFound, Unavailable

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
    """A turn to run; ``start.turn_id`` is set (the stream chose one if the client did not)."""

    tenant: str
    start: agent_pb2.StartTurn
    request_id: str


@dataclass(frozen=True)
class LoopSettings:
    default_max_tool_rounds: int = 2
    history_budget_tokens: int = 1200
    #: Over budget, the history is cut to this fraction of it at once (``prompt.history_cut``); 1: turn by turn.
    history_keep: float = 0.5
    plan_max_tokens: int = 160
    answer_max_tokens: int = 256
    tool_timeout_s: float = 10.0
    #: Open the answer with the tools' own summaries of their results.
    answer_opening: bool = True


class AgentLoop:
    def __init__(
        self,
        generator: Generator,
        tools: ToolsLink,
        sessions: SessionStore,
        planner: Planner,
        *,
        settings: LoopSettings = LoopSettings(),
        metrics: RouterMetrics | None = None,
        tracer: trace.Tracer | None = None,
    ) -> None:
        self._generator = generator
        self._tools = tools
        self._sessions = sessions
        self._planner = planner
        self._settings = settings
        self._metrics = metrics
        self._tracer = tracer or trace.get_tracer("agentmesh.router")
        self._round = ToolRound(tools, timeout_s=settings.tool_timeout_s, metrics=metrics, tracer=self._tracer)
        self._tool_specs: list[common_pb2.ToolSpec] | None = None

    async def tool_specs(self) -> list[common_pb2.ToolSpec]:
        if self._tool_specs is None:
            specs = await self._tools.list_tools()
            await self._planner.prepare(specs)
            self._tool_specs = specs
        return self._tool_specs

    async def warm_up(self) -> None:
        """Load the tool list and embed its cards before the first turn; a tool executor that is not up yet
        only moves that work to the first turn that needs it."""
        try:
            await self.tool_specs()
        except (grpc.aio.AioRpcError, Unavailable) as exc:
            why = exc.code().name if isinstance(exc, grpc.aio.AioRpcError) else exc.message
            log.warning("tool list not loaded at start (%s); the first turn will load it", why)

    async def run(self, req: TurnRequest, progress: TurnProgress) -> AsyncGenerator[agent_pb2.ConverseResponse, None]:
        turn_id = progress.turn_id
        with self._tracer.start_as_current_span("agent.turn") as span:
            session = await self._load_or_create(req, turn_id)
            span.set_attribute("agentmesh.session_id", session.session_id)
            span.set_attribute("agentmesh.turn_id", turn_id)
            trace_id = format(span.get_span_context().trace_id, "032x")
            yield accepted(session.session_id, turn_id, req.request_id, trace_id)
            recorded = session.turn(turn_id)
            if recorded is not None:  # a retry of a completed turn: replay, do not run or append again
                for event in replay(recorded):
                    yield event
                return
            async for event in self._run_turn(req, session, progress):
                yield event

    async def _load_or_create(self, req: TurnRequest, turn_id: str) -> Session:
        """The session to continue; a new one for an empty id (or ``create_session``), else NotFound.

        A new session is stored before the turn runs, so a retry after this router dies finds it.
        """
        sid = req.start.session_id
        system_prompt = req.start.system_prompt or DEFAULT_SYSTEM_PROMPT
        if not sid:
            return await self._sessions.create(req.tenant, uuid.uuid4().hex, system_prompt)
        session = await self._sessions.load(req.tenant, sid, turn_id)
        if session is not None:
            return session
        if not req.start.create_session:
            raise NotFound(
                f"session {sid} not found (unknown or expired); send an empty session_id, "
                "or set create_session, to start one"
            )
        return await self._sessions.create(req.tenant, sid, system_prompt)

    async def _run_turn(
        self, req: TurnRequest, session: Session, progress: TurnProgress
    ) -> AsyncGenerator[agent_pb2.ConverseResponse, None]:
        start = req.start
        s = self._settings
        p = progress
        turn_id = p.turn_id
        record = TurnRecord(turn_id=turn_id, user_message=start.message)
        past = [PastTurn(t.user_message, t.answer) for t in session.turns]
        cut = history_cut(
            past, s.history_budget_tokens, first=session.first_turn, omitted=session.omitted, keep=s.history_keep
        )
        history = render_history(past, cut, first=session.first_turn)
        session.omitted = cut
        mode = MODES.get(start.tool_choice.mode, "auto")
        counters = p.counters
        results: list[tools_pb2.ToolResult] = []
        arguments: dict[str, str] = {}
        p.method = agent_pb2.TOOL_SELECTION_SKIPPED
        specs = await self.tool_specs() if mode != "none" else []
        if specs:
            last = session.turns[-1] if session.turns else None
            turn = PlanInput(
                message=start.message,
                mode=mode,
                named_tool=start.tool_choice.tool_name,
                priority=start.priority,
                previous_message=last.user_message if last else "",
                previous_answer=last.answer if last else "",
            )
            t0 = time.perf_counter()
            plan = await self._planner.plan(specs, turn, counters)
            p.method = plan.method
            calls = plan.calls
            p.planning_s += time.perf_counter() - t0
            done_calls: set[tuple[str, str]] = set()
            max_rounds = start.max_tool_rounds or s.default_max_tool_rounds
            while calls and p.rounds < max_rounds:
                p.rounds += 1
                t0 = time.perf_counter()
                async for event in self._round.run(calls, turn_id, p.rounds, record, results, arguments):
                    yield event
                p.tools_s += time.perf_counter() - t0
                done_calls |= {(c.name, c.arguments_json) for c in calls}
                if self._planner.selection_mode != "llm" or p.rounds >= max_rounds:
                    break
                t0 = time.perf_counter()
                calls = await self._planner.replan(specs, turn, results_text(results, arguments), counters)
                calls = [c for c in calls if (c.name, c.arguments_json) not in done_calls]
                p.planning_s += time.perf_counter() - t0

        t0 = time.perf_counter()
        opening = answer_opening(results) if results and s.answer_opening else ""
        messages = answer_messages(
            session.system_prompt, history, start.message, tool_messages(results, arguments), opening
        )
        sampling = common_pb2.SamplingParams()
        sampling.CopyFrom(start.sampling)
        if not sampling.HasField("temperature"):
            sampling.temperature = 0.0
        if not sampling.HasField("max_tokens"):
            sampling.max_tokens = s.answer_max_tokens
        done: GenerationDone | None = None
        answer = p.answer_text
        p.answer_prompt = messages
        with self._tracer.start_as_current_span("agent.answer") as span:
            spec = GenerationSpec(
                messages,
                sampling,
                start.priority or common_pb2.PRIORITY_P1,
                sampling_field="start_turn.sampling",
                continue_final=bool(opening),
            )
            if opening:
                p.ttft_s = self._first_token(p.started)
                answer.append(opening)
                yield text_delta(turn_id, opening)
            async for piece in self._generator.stream(spec):
                p.answering_s = time.perf_counter() - t0
                if piece.text:
                    if not answer:
                        p.ttft_s = self._first_token(p.started)
                    answer.append(piece.text)
                    yield text_delta(turn_id, piece.text)
                if piece.done is not None:
                    done = piece.done
            if done is None:  # the generator always ends with done; a bug otherwise
                raise RuntimeError("generation ended without a result")
            annotate(span, done)
        p.answering_s = time.perf_counter() - t0
        counters.add(done, self._metrics)
        p.answer_prompt = []  # counted exactly now
        usage = counters.usage
        total = time.perf_counter() - p.started
        record.answer = "".join(answer)
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
            for step, secs in (("planning", p.planning_s), ("tools", p.tools_s), ("answering", p.answering_s)):
                self._metrics.step_seconds.labels(step).observe(secs)
        yield completed(p, done.finish_reason, cached=done.cached)

    def _first_token(self, turn_start: float) -> float:
        ttft = time.perf_counter() - turn_start
        if self._metrics is not None:
            self._metrics.ttft.observe(ttft)
        return ttft
