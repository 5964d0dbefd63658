"""The one place turns become ``ConverseResponse`` events, for turns that finish and turns that do not.

A ``TurnProgress`` is what a running turn has done so far (its id, token
counters, timings, tool rounds). The agent loop fills it in as it goes; the
Converse stream keeps it, so a turn that is cancelled, times out or fails can
still end with a ``TurnCompleted`` that carries its usage so far — the gateway
charges the tenant from that message, and a client learns why the turn ended.
Usage so far is exact for every generation that finished, and estimated (4
characters per token, as history compression does) for the answer that was
streaming when the turn stopped: an aborted engine request reports no counts.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from google.rpc import status_pb2

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from services.router.planning import TurnCounters
from services.router.prompt import Message, estimate_tokens
from services.router.sessions import TurnRecord
from services.runtime.protoutil import duration


@dataclass
class TurnProgress:
    """A turn as it runs; in: what the agent loop has done, out: the turn's ``TurnCompleted``."""

    turn_id: str
    queued_s: float = 0.0
    started: float = field(default_factory=time.perf_counter)
    counters: TurnCounters = field(default_factory=TurnCounters)
    ttft_s: float = 0.0
    planning_s: float = 0.0
    tools_s: float = 0.0
    answering_s: float = 0.0
    rounds: int = 0
    method: agent_pb2.ToolSelection.ValueType = agent_pb2.TOOL_SELECTION_UNSPECIFIED
    #: The answer generation in flight: its prompt and the text streamed so far (cleared once it finishes).
    answer_prompt: list[Message] = field(default_factory=list)
    answer_text: list[str] = field(default_factory=list)
    #: Set once the turn's TurnCompleted is on its way to the client: it is never sent twice.
    completed: bool = False

    def usage_so_far(self) -> common_pb2.Usage:
        usage = common_pb2.Usage()
        usage.CopyFrom(self.counters.usage)
        if self.answer_prompt:
            usage.prompt_tokens += estimate_tokens(self.answer_prompt)
            usage.completion_tokens += (sum(len(t) for t in self.answer_text) + 3) // 4
        return usage


def accepted(session_id: str, turn_id: str, request_id: str, trace_id: str) -> agent_pb2.ConverseResponse:
    return agent_pb2.ConverseResponse(
        turn_accepted=agent_pb2.TurnAccepted(
            session_id=session_id, turn_id=turn_id, request_id=request_id, trace_id=trace_id
        )
    )


def text_delta(turn_id: str, text: str) -> agent_pb2.ConverseResponse:
    return agent_pb2.ConverseResponse(text_delta=agent_pb2.TextDelta(text=text, turn_id=turn_id))


def completed(
    progress: TurnProgress,
    finish_reason: common_pb2.FinishReason.ValueType,
    *,
    cached: bool = False,
    status: status_pb2.Status | None = None,
) -> agent_pb2.ConverseResponse:
    """The turn's TurnCompleted from what it did (finished or not); ``status`` when it failed."""
    total = time.perf_counter() - progress.started
    return agent_pb2.ConverseResponse(
        turn_completed=agent_pb2.TurnCompleted(
            turn_id=progress.turn_id,
            usage=progress.usage_so_far(),
            finish_reason=finish_reason,
            time_to_first_token=duration(progress.ttft_s),
            timings=agent_pb2.TurnTimings(
                queued=duration(progress.queued_s),
                planning=duration(progress.planning_s),
                tools=duration(progress.tools_s),
                answering=duration(progress.answering_s),
                total=duration(total),
            ),
            cached=cached,
            tool_rounds=progress.rounds,
            generations=progress.counters.generations,
            tool_selection=progress.method,
            status=status.SerializeToString() if status is not None else b"",
        )
    )


def replay(turn: TurnRecord) -> Iterator[agent_pb2.ConverseResponse]:
    """A recorded turn's events again (a retried turn id), from the session log."""
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
        yield text_delta(turn.turn_id, turn.answer)
    yield agent_pb2.ConverseResponse(
        turn_completed=agent_pb2.TurnCompleted(
            turn_id=turn.turn_id,
            usage=common_pb2.Usage(**turn.usage),
            finish_reason=turn.finish_reason,  # type: ignore[arg-type]
            cached=True,
            tool_rounds=1 if turn.tool_calls else 0,
        )
    )
