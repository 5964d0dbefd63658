"""A tool call's record: what the executor said about a failure, and a client call's side, survive the session log."""

from __future__ import annotations

from agentmesh.common.v1 import common_pb2
from agentmesh.tools.v1 import tools_pb2
from services.router.serving.convert import finished_event, record_result, replay
from services.router.sessions.records import ToolRecord, TurnRecord, fold


def test_the_failure_reason_reaches_the_event_and_the_session_log() -> None:
    call = ToolRecord("c1", "wiki.search", "{}")
    failed = tools_pb2.ToolResult(
        call_id="c1",
        status=common_pb2.TOOL_CALL_STATUS_UNAVAILABLE,
        error_message="server wiki is down",
        error_reason="MCP_SERVER_UNAVAILABLE",
    )
    record_result(call, failed)
    assert finished_event(call).tool_call_finished.error_reason == "MCP_SERVER_UNAVAILABLE"
    turn = TurnRecord("t1", "search the wiki", answer="It is down.", tool_calls=[call], completed_at=1.0)
    (again,) = fold(turn.events())
    assert again.tool_calls[0].error_reason == "MCP_SERVER_UNAVAILABLE"
    assert TurnRecord.from_json(turn.to_json()).tool_calls[0].error_reason == "MCP_SERVER_UNAVAILABLE"


def test_a_turn_that_ended_at_client_calls_hands_them_out_again_on_replay() -> None:
    handed = ToolRecord("c1", "get_order_status", '{"order_id":"A-1"}', client_side=True)
    turn = TurnRecord("t1", "where is A-1?", tool_calls=[handed], finish_reason=5, completed_at=1.0)
    (again,) = fold(turn.events())
    assert again.tool_calls[0].client_side
    kinds = [e.WhichOneof("event") for e in replay(again)]
    assert kinds == ["tool_call_started", "client_tool_calls", "turn_completed"]
    assert [
        c.call_id for c in next(e for e in replay(again) if e.HasField("client_tool_calls")).client_tool_calls.calls
    ] == ["c1"]
