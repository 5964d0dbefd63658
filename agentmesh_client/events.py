"""Typed events of AgentService streams, and the one place they are decoded from the protos.

A Converse turn yields ``TurnStarted`` → ``ToolCallStarted``/``ToolCallProgress``/``ToolCallFinished``/``TextDelta``
(any order the agent produces them; a call's progress between its start and its finish; ``ClientToolCalls`` when
the plan calls the client's own tools, after their ToolCallStarted) → ``TurnCompleted``;
``Draining`` may arrive at any time. A Complete stream yields
``CompletionStarted`` → ``TextDelta``… → ``CompletionFinished``. Plain frozen dataclasses rather than the protos,
so callers match on types (``match event: case TextDelta(text=t)``) and never test oneof names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from google.protobuf.duration_pb2 import Duration
from google.rpc import status_pb2

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from services.runtime.errors import AgentMeshError
from services.runtime.status_decode import error_of, rich_error_of_status


def _seconds(value: Duration) -> float:
    return value.ToNanoseconds() / 1e9


def _name(enum: Any, value: int, prefix: str) -> str:
    """``FINISH_REASON_STOP`` → ``stop``: enum names as short lowercase words."""
    return str(enum.Name(value)).removeprefix(prefix).lower()


@dataclass(frozen=True)
class Usage:
    """Tokens a turn or completion used; ``cached_prompt_tokens`` came from the prefix cache."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @classmethod
    def of(cls, usage: common_pb2.Usage) -> Usage:
        return cls(usage.prompt_tokens, usage.completion_tokens, usage.cached_prompt_tokens)


@dataclass(frozen=True)
class TurnStarted:
    """The turn was admitted; ``session_id`` continues the conversation in later turns."""

    session_id: str
    turn_id: str
    request_id: str
    trace_id: str


@dataclass(frozen=True)
class TextDelta:
    """More answer text (``turn_id`` is empty on Complete streams)."""

    text: str
    turn_id: str = ""


@dataclass(frozen=True)
class ToolCallStarted:
    """The agent called a tool: a server-side one, or (``client_side``) one of the turn's client tools."""

    call_id: str
    tool_name: str
    arguments_json: str
    round: int
    client_side: bool = False

    @property
    def arguments(self) -> Any:
        return json.loads(self.arguments_json) if self.arguments_json else {}


@dataclass(frozen=True)
class ClientToolCall:
    """One call of a client tool, for the client to run and answer by ``call_id``."""

    call_id: str
    tool_name: str
    arguments_json: str

    @property
    def arguments(self) -> Any:
        return json.loads(self.arguments_json) if self.arguments_json else {}


@dataclass(frozen=True)
class ClientToolCalls:
    """The turn calls client tools and waits (up to ``wait_s``) for their results, unless it ends at them."""

    turn_id: str
    round: int
    calls: tuple[ClientToolCall, ...]
    wait_s: float


@dataclass(frozen=True)
class ToolCallProgress:
    """A running tool call reported how far it has got; ``total`` is None when the tool does not know it."""

    call_id: str
    tool_name: str
    progress: float
    total: float | None
    message: str


@dataclass(frozen=True)
class ToolCallFinished:
    """A tool call ended; ``status`` is ``ok``, ``error``, ``timeout``, ... (ToolCallStatus, short)."""

    call_id: str
    tool_name: str
    status: str
    output_json: str
    error_message: str
    latency_s: float
    cached: bool
    #: The executor's machine-readable cause of a failure (e.g. ``MCP_SERVER_UNAVAILABLE``); "" otherwise.
    error_reason: str = ""


@dataclass(frozen=True)
class TurnCompleted:
    """The last event of every turn. ``error`` is set when the turn was rejected or failed (not when cancelled).

    ``finish_reason``: ``stop``, ``length``, ``aborted`` (cancelled or timed out), ``error``, or ``tool_calls``
    (the turn ended at client tool calls: ``end_at_client_calls``).
    """

    turn_id: str
    usage: Usage
    finish_reason: str
    ttft_s: float | None
    cached: bool
    tool_rounds: int
    generations: int
    tool_selection: str
    total_s: float
    error: AgentMeshError | None = None


@dataclass(frozen=True)
class Draining:
    """The server is shutting down: finish this turn, then reconnect after ``retry_after_s``."""

    reason: str
    retry_after_s: float


@dataclass(frozen=True)
class CompletionStarted:
    """A Complete request was admitted."""

    request_id: str
    trace_id: str


@dataclass(frozen=True)
class CompletionFinished:
    """A Complete answer ended."""

    usage: Usage
    finish_reason: str
    ttft_s: float | None
    cached: bool


TurnEvent = (
    TurnStarted
    | TextDelta
    | ToolCallStarted
    | ToolCallProgress
    | ToolCallFinished
    | ClientToolCalls
    | TurnCompleted
    | Draining
)
CompletionEvent = CompletionStarted | TextDelta | CompletionFinished


def finish_reason_name(value: common_pb2.FinishReason.ValueType) -> str:
    return _name(common_pb2.FinishReason, value, "FINISH_REASON_")


def turn_event_of(message: agent_pb2.ConverseResponse) -> TurnEvent | None:
    """The typed form of one Converse event (None for an event this client does not know yet)."""
    kind = message.WhichOneof("event")
    if kind == "turn_accepted":
        a = message.turn_accepted
        return TurnStarted(a.session_id, a.turn_id, a.request_id, a.trace_id)
    if kind == "text_delta":
        return TextDelta(message.text_delta.text, message.text_delta.turn_id)
    if kind == "tool_call_started":
        s = message.tool_call_started
        return ToolCallStarted(s.call_id, s.tool_name, s.arguments_json, s.round, s.client_side)
    if kind == "client_tool_calls":
        handed = message.client_tool_calls
        calls = tuple(ClientToolCall(x.call_id, x.tool_name, x.arguments_json) for x in handed.calls)
        return ClientToolCalls(handed.turn_id, handed.round, calls, _seconds(handed.wait))
    if kind == "tool_call_progress":
        p = message.tool_call_progress
        return ToolCallProgress(p.call_id, p.tool_name, p.progress, p.total if p.HasField("total") else None, p.message)
    if kind == "tool_call_finished":
        f = message.tool_call_finished
        status = _name(common_pb2.ToolCallStatus, f.status, "TOOL_CALL_STATUS_")
        return ToolCallFinished(
            f.call_id,
            f.tool_name,
            status,
            f.output_json,
            f.error_message,
            _seconds(f.latency),
            f.cached,
            f.error_reason,
        )
    if kind == "turn_completed":
        c = message.turn_completed
        ttft = _seconds(c.time_to_first_token)
        error = error_of(rich_error_of_status(status_pb2.Status.FromString(c.status))) if c.status else None
        return TurnCompleted(
            turn_id=c.turn_id,
            usage=Usage.of(c.usage),
            finish_reason=finish_reason_name(c.finish_reason),
            ttft_s=ttft if ttft > 0 else None,
            cached=c.cached,
            tool_rounds=c.tool_rounds,
            generations=c.generations,
            tool_selection=_name(agent_pb2.ToolSelection, c.tool_selection, "TOOL_SELECTION_"),
            total_s=_seconds(c.timings.total),
            error=error,
        )
    if kind == "draining":
        return Draining(message.draining.reason, _seconds(message.draining.retry_after))
    return None


def completion_event_of(message: agent_pb2.CompleteResponse) -> CompletionEvent | None:
    """The typed form of one Complete event (None for an event this client does not know yet)."""
    kind = message.WhichOneof("event")
    if kind == "started":
        return CompletionStarted(message.started.request_id, message.started.trace_id)
    if kind == "text_delta":
        return TextDelta(message.text_delta.text, message.text_delta.turn_id)
    if kind == "finished":
        f = message.finished
        ttft = _seconds(f.time_to_first_token)
        return CompletionFinished(Usage.of(f.usage), finish_reason_name(f.finish_reason), ttft or None, f.cached)
    return None
