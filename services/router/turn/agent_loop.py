"""One agent turn, orchestrated: load the session → select and run tools → answer → record.

In: a ``TurnRequest`` and the turn's ``TurnProgress``. Out: the turn's events
as ``ConverseResponse`` messages, in the order the client sees them
(TurnAccepted; per round, ToolCallStarted for each planned call, then
ToolCallFinished as each finishes; TextDelta, with the turn id, as the answer
streams; TurnCompleted with usage, generations and how tools were selected).
The completed turn is appended to the session log; a turn id already in the
log is replayed from it, not run again. The turn's parts record what they have
done in the progress as they go, so a turn that stops early still ends with a
TurnCompleted (``serving/converse.py`` sends that one).

Tools are the tenant's: ``tools/lists.py`` follows the list each tenant may use
(the executor's WatchTools), and ``tools/planners.py`` gives each distinct list its
own planner, so a tool the tenant may not use is never a candidate.

This file only sequences the parts, each in its own module: ``planning/``
(which tools, their arguments), ``tool_round.py`` (running a round),
``answer.py`` (the answer's generation), ``serving/convert.py`` (every proto the turn
sends, and the record it stores). After a successful tool round the turn
answers: with embedding selection every ask of the message was selected up
front, so there is nothing left to plan; LLM selection (``--tool-selection
llm``, kept for comparison) chooses again with the results, bounded by
``max_tool_rounds``, as the previous path did. Cancelling the task that runs
the turn (client cancel, disconnect, deadline) cancels the generation and the
tool calls in flight. Each part's event generator is closed (``aclosing``) by
the task that iterates it, whichever way the turn ends: its spans end and its
engine request is aborted there, not later in a garbage collector's task.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass

import grpc.aio
from opentelemetry import trace

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from services.router.metrics import RouterMetrics
from services.router.planning import PlanInput
from services.router.replicas.generation import GenerationDone, Generator
from services.router.serving.convert import TOOL_CHOICE_MODES, accepted, completed, replay, usage_counts
from services.router.sessions.records import TurnRecord
from services.router.sessions.store import Session, SessionStore
from services.router.tools.link import ToolsLink
from services.router.tools.lists import ToolList, ToolLists
from services.router.tools.planners import Planners
from services.router.turn.answer import Answerer
from services.router.turn.client_tools import ClientCalls, turn_tools
from services.router.turn.progress import TurnProgress
from services.router.turn.prompt import DEFAULT_SYSTEM_PROMPT, PastTurn, history_cut, render_history, results_text
from services.router.turn.tool_round import ClientTools, ToolResults, ToolRound, per_round, take_prior
from services.runtime.errors import AlreadyExists, NotFound, Unavailable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TurnRequest:
    """A turn to run; ``start.turn_id`` is set (the stream chose one if the client did not)."""

    tenant: str
    start: agent_pb2.StartTurn
    request_id: str


@dataclass(frozen=True)
class LoopSettings:
    """The turn's limits and budgets, from the router's config."""

    default_max_tool_rounds: int = 2
    history_budget_tokens: int = 1200
    #: Over budget, the history is cut to this fraction of it at once (``prompt.history_cut``); 1: turn by turn.
    history_keep: float = 0.5
    plan_max_tokens: int = 160
    answer_max_tokens: int = 256
    #: repetition_penalty of an answer without tool results, unless the turn sets one (1: none).
    answer_repetition_penalty: float = 1.0
    tool_timeout_s: float = 10.0
    #: How long a turn waits for its client tool calls' results (the turn's deadline may cut it shorter).
    client_tool_wait_s: float = 120.0
    #: Open the answer with the tools' own summaries of their results.
    answer_opening: bool = True


class AgentLoop:
    """Runs turns: the tool lists, the planners and the session store are shared; a turn's state is its own."""

    def __init__(
        self,
        generator: Generator,
        tools: ToolsLink,
        sessions: SessionStore,
        planners: Planners,
        *,
        lists: ToolLists,
        settings: LoopSettings = LoopSettings(),
        metrics: RouterMetrics | None = None,
        tracer: trace.Tracer | None = None,
    ) -> None:
        self._tools = tools
        self._lists = lists
        self._sessions = sessions
        self._planners = planners
        self._settings = settings
        self._metrics = metrics
        self._tracer = tracer or trace.get_tracer("agentmesh.router")
        self._round = ToolRound(tools, timeout_s=settings.tool_timeout_s, metrics=metrics, tracer=self._tracer)
        self._answerer = Answerer(
            generator,
            max_tokens=settings.answer_max_tokens,
            opening=settings.answer_opening,
            repetition_penalty=settings.answer_repetition_penalty,
            metrics=metrics,
            tracer=self._tracer,
        )

    async def tool_specs(self, tenant: str) -> list[common_pb2.ToolSpec]:
        """The tools ``tenant`` may use now."""
        return (await self._lists.get(tenant)).specs

    async def warm_up(self) -> None:
        """Load the tools open to every tenant and embed their cards before the first turn (a tenant's own list
        re-embeds only its other tools); a tool executor that is not up yet only moves that work to the first
        turn that needs it."""
        try:
            await self._planners.for_list(await self._lists.get(""))
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
            async with contextlib.aclosing(self._run_turn(req, session, progress)) as events:
                async for event in events:
                    yield event

    async def _load_or_create(self, req: TurnRequest, turn_id: str) -> Session:
        """The session to continue, else NotFound; a new one for an empty id, or for ``create_session`` (the
        client's id: AlreadyExists if the tenant has it, unless this turn id created it — a retry).

        A new session is stored before the turn runs, so a retry after this router dies finds it.
        """
        sid = req.start.session_id
        system_prompt = req.start.system_prompt or DEFAULT_SYSTEM_PROMPT
        if not sid:
            return await self._sessions.create(req.tenant, uuid.uuid4().hex, system_prompt, created_by=turn_id)
        if req.start.create_session:
            created = await self._sessions.create(req.tenant, sid, system_prompt, created_by=turn_id)
            if created.created_by != turn_id:
                raise AlreadyExists(f"session {sid} already exists; continue it without create_session")
            return created
        session = await self._sessions.load(req.tenant, sid, turn_id)
        if session is None:
            raise NotFound(
                f"session {sid} not found (unknown or expired); send an empty session_id, "
                "or set create_session, to start one"
            )
        return session

    async def _run_turn(
        self, req: TurnRequest, session: Session, progress: TurnProgress
    ) -> AsyncGenerator[agent_pb2.ConverseResponse, None]:
        start = req.start
        s = self._settings
        record = TurnRecord(turn_id=progress.turn_id, user_message=start.message)
        past = [PastTurn(h.user_message, h.answer) for h in start.history]  # a client-kept conversation's
        past += [PastTurn(t.user_message, t.answer) for t in session.turns]
        cut = history_cut(
            past, s.history_budget_tokens, first=session.first_turn, omitted=session.omitted, keep=s.history_keep
        )
        history = render_history(past, cut, first=session.first_turn)
        session.omitted = cut
        tools = ToolResults()
        async with contextlib.aclosing(self._use_tools(req, session, progress, record, tools)) as events:
            async for event in events:
                yield event
        if progress.ended_at_client_calls:  # the client runs them and answers in its next turn
            await self._record(session, record, progress, common_pb2.FINISH_REASON_TOOL_CALLS)
            yield completed(progress, common_pb2.FINISH_REASON_TOOL_CALLS)
            return
        done: GenerationDone | None = None
        answer = self._answerer.stream(
            start,
            progress,
            system_prompt=session.system_prompt,
            history=history,
            tools=tools,
        )
        async with contextlib.aclosing(answer):
            async for piece in answer:
                if isinstance(piece, GenerationDone):
                    done = piece
                else:
                    yield piece
        if done is None:  # the answer always ends with done; a bug otherwise
            raise RuntimeError("answer ended without a result")
        await self._record(session, record, progress, done.finish_reason)
        yield completed(progress, done.finish_reason, cached=done.cached)

    async def _use_tools(
        self, req: TurnRequest, session: Session, progress: TurnProgress, record: TurnRecord, out: ToolResults
    ) -> AsyncGenerator[agent_pb2.ConverseResponse, None]:
        """Select the turn's tools (the tenant's) and run them, round by round; the calls land in ``record`` and
        ``out``."""
        start = req.start
        p = progress
        mode = TOOL_CHOICE_MODES.get(start.tool_choice.mode, "auto")
        p.method = agent_pb2.TOOL_SELECTION_SKIPPED
        if start.prior_tool_calls:  # the client ran this message's calls already: their results are in
            take_prior(start, record, out)
        if mode == "none":
            return
        mesh = await self._lists.get(req.tenant)
        offered = turn_tools(mesh, start)
        client: ClientTools | None = None
        if start.client_tools:
            p.client_calls = ClientCalls(p.turn_id, self._settings.client_tool_wait_s)
            names = frozenset(t.name for t in start.client_tools)
            client = ClientTools(names, p.client_calls, end_at=start.end_at_client_calls)
        if start.prior_tool_calls:  # plan only the mesh's tools now, if the turn offers any
            offered = ToolList([], "") if start.only_client_tools else mesh
            if mode == "named" and start.tool_choice.tool_name in {t.name for t in start.client_tools}:
                return  # the named client tool has run: its result is in
            if mode == "required":
                mode = "auto"  # the client's calls were the required ones
        if not offered.specs:
            return
        specs, planner = offered.specs, await self._planners.for_list(offered)
        last = session.turns[-1] if session.turns else None
        told = start.history[-1] if start.history and last is None else None
        turn = PlanInput(
            message=start.message,
            mode=mode,
            named_tool=start.tool_choice.tool_name,
            priority=start.priority,
            previous_message=last.user_message if last else told.user_message if told else "",
            previous_answer=last.answer if last else told.answer if told else "",
            previous_calls=last.successful_calls() if last else (),
            previous_result=last.single_result() if last else "",
        )
        t0 = time.perf_counter()
        plan = await planner.plan(specs, turn, p.counters)
        p.method = plan.method
        calls = per_round(plan.calls, start)
        p.planning_s += time.perf_counter() - t0
        done_calls: set[tuple[str, str]] = set()
        max_rounds = start.max_tool_rounds or self._settings.default_max_tool_rounds
        while calls and p.rounds < max_rounds:
            p.rounds += 1
            t0 = time.perf_counter()
            async with contextlib.aclosing(self._round.run(calls, p.rounds, record, out, client)) as events:
                async for event in events:
                    yield event
            p.tools_s += time.perf_counter() - t0
            done_calls |= {(c.name, c.arguments_json) for c in calls}
            if client is not None and client.end_at and any(c.name in client.names for c in calls):
                p.ended_at_client_calls = True
                return
            if not planner.replans or p.rounds >= max_rounds:
                break
            t0 = time.perf_counter()
            calls = await planner.replan(specs, turn, results_text(out.results, out.arguments), p.counters)
            calls = per_round([c for c in calls if (c.name, c.arguments_json) not in done_calls], start)
            p.planning_s += time.perf_counter() - t0

    async def _record(
        self, session: Session, record: TurnRecord, p: TurnProgress, finish_reason: common_pb2.FinishReason.ValueType
    ) -> None:
        """Append the answered turn (or one that ended at client calls) to the session log and count it."""
        total = time.perf_counter() - p.started
        record.answer = "".join(p.answer_text)
        record.usage = usage_counts(p.counters.usage)
        record.finish_reason = finish_reason
        record.completed_at = time.time()
        await self._sessions.append_turn(session, record)
        if self._metrics is not None:
            self._metrics.turns.labels("completed").inc()
            self._metrics.turn_seconds.observe(total)
            for step, secs in (("planning", p.planning_s), ("tools", p.tools_s), ("answering", p.answering_s)):
                self._metrics.step_seconds.labels(step).observe(secs)
