"""Proto ↔ domain conversion for the router: the one place turns become protos, live or from the session log.

Converse and GetSession speak of the same turns: a live turn's events are
built here from its ``TurnProgress`` and ``ToolRecord``s, a retried turn id is
replayed here from its ``TurnRecord``, and GetSession's ``Turn`` messages are
built here from the same records — so a tool call reads the same in a stream,
in a replay and in the session. The other direction is here too: a tool's
``ToolResult`` into its record, a generation's usage into the record's
counts, and the request's tool-choice mode into the planner's word.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from google.protobuf import duration_pb2
from google.rpc import status_pb2

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from agentmesh.tools.v1 import tools_pb2
from services.router.sessions.records import ToolRecord, TurnRecord
from services.router.sessions.store import Session
from services.router.turn.progress import TurnProgress
from services.runtime.protoutil import duration, timestamp

#: StartTurn's tool-choice mode as the planner names it; a mode not listed here is refused by validation.
TOOL_CHOICE_MODES = {
    agent_pb2.TOOL_CHOICE_MODE_UNSPECIFIED: "auto",
    agent_pb2.TOOL_CHOICE_MODE_AUTO: "auto",
    agent_pb2.TOOL_CHOICE_MODE_NONE: "none",
    agent_pb2.TOOL_CHOICE_MODE_REQUIRED: "required",
    agent_pb2.TOOL_CHOICE_MODE_NAMED: "named",
}
USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "cached_prompt_tokens")


def usage_counts(usage: common_pb2.Usage) -> dict[str, int]:
    """A generation's usage as a turn record keeps it."""
    return {name: getattr(usage, name) for name in USAGE_FIELDS}


def record_result(record: ToolRecord, result: tools_pb2.ToolResult) -> None:
    """Fill a tool call's record with its result."""
    record.status, record.output_json, record.error_message = result.status, result.output_json, result.error_message
    record.latency_s, record.cached = result.latency.ToNanoseconds() / 1e9, result.cached
    record.error_reason = result.error_reason


def tool_call_finished(call: ToolRecord, latency: duration_pb2.Duration | None = None) -> agent_pb2.ToolCallFinished:
    """A finished tool call; ``latency``: the tool's own Duration when at hand (exact), else the record's."""
    return agent_pb2.ToolCallFinished(
        call_id=call.call_id,
        tool_name=call.tool_name,
        status=common_pb2.ToolCallStatus.ValueType(call.status),
        output_json=call.output_json,
        error_message=call.error_message,
        latency=latency if latency is not None else duration(call.latency_s),
        cached=call.cached,
        error_reason=call.error_reason,
    )


# -- Converse events ---------------------------------------------------------


def accepted(session_id: str, turn_id: str, request_id: str, trace_id: str) -> agent_pb2.ConverseResponse:
    return agent_pb2.ConverseResponse(
        turn_accepted=agent_pb2.TurnAccepted(
            session_id=session_id, turn_id=turn_id, request_id=request_id, trace_id=trace_id
        )
    )


def started_event(call: ToolRecord, round_no: int) -> agent_pb2.ConverseResponse:
    return agent_pb2.ConverseResponse(
        tool_call_started=agent_pb2.ToolCallStarted(
            call_id=call.call_id,
            tool_name=call.tool_name,
            arguments_json=call.arguments_json,
            round=round_no,
            client_side=call.client_side,
        )
    )


def progress_event(frame: tools_pb2.ToolProgress) -> agent_pb2.ConverseResponse:
    """A running call's progress as the executor reported it (live only: never stored or replayed)."""
    event = agent_pb2.ToolCallProgress(
        call_id=frame.call_id, tool_name=frame.tool_name, progress=frame.progress, message=frame.message
    )
    if frame.HasField("total"):
        event.total = frame.total
    return agent_pb2.ConverseResponse(tool_call_progress=event)


def finished_event(call: ToolRecord, latency: duration_pb2.Duration | None = None) -> agent_pb2.ConverseResponse:
    return agent_pb2.ConverseResponse(tool_call_finished=tool_call_finished(call, latency))


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
    """A recorded turn's events again (a retried turn id), from the session log; a turn that ended at client
    calls hands them out again."""
    handed = agent_pb2.ClientToolCalls(turn_id=turn.turn_id, round=1)
    for call in turn.tool_calls:
        yield started_event(call, 1)
        if call.client_side and not call.status:
            handed.calls.add(call_id=call.call_id, tool_name=call.tool_name, arguments_json=call.arguments_json)
        else:
            yield finished_event(call)
    if handed.calls:
        yield agent_pb2.ConverseResponse(client_tool_calls=handed)
    if turn.answer:
        yield text_delta(turn.turn_id, turn.answer)
    yield agent_pb2.ConverseResponse(
        turn_completed=agent_pb2.TurnCompleted(
            turn_id=turn.turn_id,
            usage=common_pb2.Usage(**turn.usage),
            finish_reason=common_pb2.FinishReason.ValueType(turn.finish_reason),
            cached=True,
            tool_rounds=1 if turn.tool_calls else 0,
        )
    )


# -- GetSession ----------------------------------------------------------------


def turn_message(turn: TurnRecord) -> agent_pb2.Turn:
    return agent_pb2.Turn(
        turn_id=turn.turn_id,
        user_message=turn.user_message,
        tool_calls=[tool_call_finished(call) for call in turn.tool_calls],
        answer=turn.answer,
        usage=common_pb2.Usage(**turn.usage),
        finish_reason=common_pb2.FinishReason.ValueType(turn.finish_reason),
        completed_at=timestamp(turn.completed_at),
    )


def session_message(session: Session) -> agent_pb2.Session:
    """A page of a session: its meta and the turns read (``session.turns``)."""
    return agent_pb2.Session(
        session_id=session.session_id,
        system_prompt=session.system_prompt,
        turns=[turn_message(turn) for turn in session.turns],
        created_at=timestamp(session.created_at),
        expires_at=timestamp(time.time() + session.ttl_s),
        turn_count=session.turn_count,
    )
