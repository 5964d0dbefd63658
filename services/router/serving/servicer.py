"""The router's AgentService: Converse, Complete, GetSession, ListTools.

Thin: decode and validate, hand the stream to ``ConverseStream`` (turns one
at a time, each ending with one TurnCompleted, see ``converse.py``) or a
single generation to ``Generator`` (Complete), encode. GetSession's turns
come from ``convert.py``, as the Converse events of the same turns do. The
tenant comes from the ``x-agentmesh-tenant`` metadata set by the gateway after
auth.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import grpc.aio
from opentelemetry import trace

from agentmesh.agent.v1 import agent_pb2, agent_pb2_grpc
from agentmesh.common.v1 import common_pb2
from services.router.replicas.generation import GenerationSpec, Generator
from services.router.serving.converse import ConverseStream
from services.router.serving.convert import TOOL_CHOICE_MODES, session_message
from services.router.sessions.store import SessionStore
from services.router.turn.agent_loop import AgentLoop
from services.router.turn.answer import default_repetition_penalty
from services.router.turn.client_tools import check_client_tools
from services.router.turn.prompt import DEFAULT_SYSTEM_PROMPT, Message
from services.runtime.context import current_request_id
from services.runtime.converse_loop import OpenStreams
from services.runtime.errors import FieldViolation, InvalidArgument, NotFound, Unauthenticated
from services.runtime.protoutil import duration
from services.runtime.server import Service
from services.runtime.tenancy import TENANT_HEADER, current_tenant

SERVICE_NAME = agent_pb2.DESCRIPTOR.services_by_name["AgentService"].full_name
MAX_MESSAGE_CHARS = 32_000
MAX_ID_CHARS = 128
#: A session id a client chooses (StartTurn.create_session): safe in a shell, a URL and a Redis key.
NEW_SESSION_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
MAX_TURN_TIMEOUT_S = 3600.0
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200


def tenant_of(context: grpc.aio.ServicerContext[Any, Any]) -> str:
    """The tenant ``tenancy.TenantInterceptor`` checked; a router wired without it refuses rather than guess."""
    tenant = current_tenant()
    if not tenant:
        raise Unauthenticated(f"no tenant: set {TENANT_HEADER} (the gateway does)", reason="TENANT_MISSING")
    return tenant


def check_sampling(s: common_pb2.SamplingParams, prefix: str, max_tokens: int) -> list[FieldViolation]:
    bad = []
    if s.HasField("temperature") and not 0 <= s.temperature <= 2:
        bad.append(FieldViolation(f"{prefix}.temperature", "must be between 0 and 2"))
    if s.HasField("top_p") and not 0 < s.top_p <= 1:
        bad.append(FieldViolation(f"{prefix}.top_p", "must be in (0, 1]"))
    if s.HasField("max_tokens") and not 1 <= s.max_tokens <= max_tokens:
        bad.append(FieldViolation(f"{prefix}.max_tokens", f"must be between 1 and {max_tokens}"))
    for name in ("presence_penalty", "frequency_penalty"):
        if s.HasField(name) and not -2 <= getattr(s, name) <= 2:
            bad.append(FieldViolation(f"{prefix}.{name}", "must be between -2 and 2"))
    if s.HasField("repetition_penalty") and not (math.isfinite(s.repetition_penalty) and s.repetition_penalty > 0):
        bad.append(FieldViolation(f"{prefix}.repetition_penalty", "must be greater than 0 (1: no penalty)"))
    return bad


def _raise(bad: list[FieldViolation]) -> None:
    if bad:
        raise InvalidArgument("; ".join(f"{v.field}: {v.description}" for v in bad), bad)


class AgentServicer(agent_pb2_grpc.AgentServiceServicer):
    def __init__(
        self,
        loop: AgentLoop,
        generator: Generator,
        sessions: SessionStore,
        *,
        max_output_tokens: int = 1024,
        repetition_penalty: float = 1.0,
        max_client_tools: int = 128,
    ) -> None:
        self._loop = loop
        self._max_client_tools = max_client_tools
        self._generator = generator
        self._sessions = sessions
        self._max_output_tokens = max_output_tokens
        self._repetition_penalty = repetition_penalty  # of a Complete that sets none: plain chat, as in answer.py
        self._open_streams: OpenStreams[agent_pb2.ConverseResponse] = OpenStreams()

    def service(self) -> Service:
        return Service(SERVICE_NAME, lambda server: agent_pb2_grpc.add_AgentServiceServicer_to_server(self, server))

    async def announce_draining(self) -> None:
        """Tell every open Converse stream to finish its turn and reconnect elsewhere."""
        notice = agent_pb2.ConverseResponse(
            draining=agent_pb2.DrainNotice(reason="server shutting down", retry_after=duration(1.0))
        )
        await self._open_streams.announce(notice)

    async def validate_start(self, start: agent_pb2.StartTurn, tenant: str) -> None:
        """Field violations of ``start`` (INVALID_ARGUMENT); a named tool must be one ``tenant`` may use."""
        bad = []
        if not start.message.strip():
            bad.append(FieldViolation("start_turn.message", "must not be empty"))
        elif len(start.message) > MAX_MESSAGE_CHARS:
            bad.append(FieldViolation("start_turn.message", f"must be at most {MAX_MESSAGE_CHARS} characters"))
        for name in ("session_id", "turn_id"):
            value = getattr(start, name)
            if len(value) > MAX_ID_CHARS or any(c.isspace() or c in "{}" for c in value):
                bad.append(FieldViolation(f"start_turn.{name}", "at most 128 characters, no spaces or braces"))
            elif name == "session_id" and value and start.create_session and not NEW_SESSION_ID.fullmatch(value):
                rule = "a new session's id is 1-128 letters, digits, '.', '_' or '-'"
                bad.append(FieldViolation("start_turn.session_id", rule))
        if start.tool_choice.mode not in TOOL_CHOICE_MODES:
            bad.append(FieldViolation("start_turn.tool_choice.mode", "unknown mode"))
        mesh_names = {t.name for t in await self._loop.tool_specs(tenant)}
        bad += check_client_tools(start, mesh_names, self._max_client_tools)
        if start.tool_choice.mode == agent_pb2.TOOL_CHOICE_MODE_NAMED:
            names = {t.name for t in start.client_tools} | (set() if start.only_client_tools else mesh_names)
            if start.tool_choice.tool_name not in names:
                bad.append(FieldViolation("start_turn.tool_choice.tool_name", f"must be one of {sorted(names)}"))
        if start.max_tool_rounds > 8:
            bad.append(FieldViolation("start_turn.max_tool_rounds", "must be at most 8"))
        if start.HasField("timeout") and not 0 < start.timeout.ToNanoseconds() <= MAX_TURN_TIMEOUT_S * 1e9:
            bad.append(FieldViolation("start_turn.timeout", f"must be positive and at most {MAX_TURN_TIMEOUT_S:g}s"))
        bad += check_sampling(start.sampling, "start_turn.sampling", self._max_output_tokens)
        _raise(bad)

    # A coroutine that writes with context.write, where the generated stub assumes a generator.
    async def Converse(  # type: ignore[override]
        self,
        request_iterator: AsyncIterator[agent_pb2.ConverseRequest],
        context: grpc.aio.ServicerContext[agent_pb2.ConverseRequest, agent_pb2.ConverseResponse],
    ) -> None:
        async with self._open_streams.open(context, request_iterator) as send:
            await ConverseStream(self._loop, self.validate_start, tenant_of(context), send).run(request_iterator)

    async def Complete(
        self,
        request: agent_pb2.CompleteRequest,
        context: grpc.aio.ServicerContext[agent_pb2.CompleteRequest, agent_pb2.CompleteResponse],
    ) -> AsyncIterator[agent_pb2.CompleteResponse]:
        async with contextlib.aclosing(self.complete_events(request)) as events:
            async for event in events:
                yield event

    async def complete_events(
        self, request: agent_pb2.CompleteRequest
    ) -> AsyncGenerator[agent_pb2.CompleteResponse, None]:
        """One Complete's events, for a call of its own or a request on a gateway's relay stream (``relay.py``):
        validate (InvalidArgument), ``started``, the text as the generator coalesces it, ``finished``."""
        bad = []
        if not request.prompt.strip():
            bad.append(FieldViolation("prompt", "must not be empty"))
        elif len(request.prompt) > MAX_MESSAGE_CHARS:
            bad.append(FieldViolation("prompt", f"must be at most {MAX_MESSAGE_CHARS} characters"))
        bad += check_sampling(request.sampling, "sampling", self._max_output_tokens)
        _raise(bad)
        span_context = trace.get_current_span().get_span_context()
        yield agent_pb2.CompleteResponse(
            started=agent_pb2.CompleteStarted(
                request_id=current_request_id(), trace_id=format(span_context.trace_id, "032x")
            )
        )
        sampling = common_pb2.SamplingParams()
        sampling.CopyFrom(request.sampling)
        if not sampling.HasField("temperature"):
            sampling.temperature = 0.0
        default_repetition_penalty(sampling, self._repetition_penalty)
        messages = [Message("system", request.system_prompt or DEFAULT_SYSTEM_PROMPT), Message("user", request.prompt)]
        spec = GenerationSpec(messages, sampling, request.priority or common_pb2.PRIORITY_P1)
        async with contextlib.aclosing(self._generator.stream(spec)) as generation:
            async for event in generation:
                if event.text:
                    yield agent_pb2.CompleteResponse(text_delta=agent_pb2.TextDelta(text=event.text))
                if event.done is not None:
                    d = event.done
                    yield agent_pb2.CompleteResponse(
                        finished=agent_pb2.CompleteFinished(
                            usage=d.usage,
                            finish_reason=d.finish_reason,
                            time_to_first_token=duration(d.ttft_s),
                            cached=d.cached,
                        )
                    )

    async def GetSession(
        self,
        request: agent_pb2.GetSessionRequest,
        context: grpc.aio.ServicerContext[agent_pb2.GetSessionRequest, agent_pb2.GetSessionResponse],
    ) -> agent_pb2.GetSessionResponse:
        bad = [] if request.session_id else [FieldViolation("session_id", "must not be empty")]
        if request.page_size > MAX_PAGE_SIZE:
            bad.append(FieldViolation("page_size", f"must be at most {MAX_PAGE_SIZE}"))
        token = request.page_token
        if token and not (token.isdigit() and token.isascii() and len(token) <= 12 and int(token) > 0):
            bad.append(FieldViolation("page_token", "not a token this service returned"))
        _raise(bad)
        start, size = int(token or "1"), request.page_size or DEFAULT_PAGE_SIZE
        session = await self._sessions.page(tenant_of(context), request.session_id, start, size)
        if session is None:
            raise NotFound(f"session {request.session_id} not found")
        last = session.first_turn + len(session.turns)
        next_token = str(last + 1) if session.turns and last < session.turn_count else ""
        return agent_pb2.GetSessionResponse(session=session_message(session), next_page_token=next_token)

    async def ListTools(
        self,
        request: agent_pb2.ListToolsRequest,
        context: grpc.aio.ServicerContext[agent_pb2.ListToolsRequest, agent_pb2.ListToolsResponse],
    ) -> agent_pb2.ListToolsResponse:
        return agent_pb2.ListToolsResponse(tools=await self._loop.tool_specs(tenant_of(context)))
