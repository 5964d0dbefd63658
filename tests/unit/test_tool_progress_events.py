"""ToolCallProgress at the edges: decoded by the typed client, one line in ``agentmesh chat``, a ``progress``
phase in the OpenAI edge's ``agentmesh`` field of a streamed chunk."""

from __future__ import annotations

import io
import json

from agentmesh.agent.v1 import agent_pb2
from agentmesh_client import ToolCallProgress
from agentmesh_client.events import turn_event_of
from gateway.openai_response import Reply, tool_event
from services.cli.chat import render


def progress_message(total: float | None) -> agent_pb2.ConverseResponse:
    event = agent_pb2.ToolCallProgress(call_id="t-1-0", tool_name="warehouse__reorder", progress=2, message="reserving")
    if total is not None:
        event.total = total
    return agent_pb2.ConverseResponse(tool_call_progress=event)


def test_the_typed_client_decodes_progress_with_and_without_a_total() -> None:
    assert turn_event_of(progress_message(3)) == ToolCallProgress("t-1-0", "warehouse__reorder", 2.0, 3.0, "reserving")
    assert turn_event_of(progress_message(None)) == ToolCallProgress(
        "t-1-0", "warehouse__reorder", 2.0, None, "reserving"
    )


def test_the_cli_prints_one_short_line() -> None:
    out = io.StringIO()
    render(ToolCallProgress("t-1-0", "warehouse__reorder", 2.0, 3.0, "reserving"), out)
    render(ToolCallProgress("t-1-0", "warehouse__reorder", 5.0, None, ""), out)
    assert out.getvalue() == "  … warehouse__reorder 2/3: reserving\n  … warehouse__reorder 5\n"


def test_the_openai_edge_streams_it_as_a_progress_phase() -> None:
    reply = Reply(model="agentmesh-agent", request_id="r1", session_id="s1", turn_id="t1")
    chunk = reply.chunk(tool=tool_event(ToolCallProgress("t-1-0", "warehouse__reorder", 2.0, 3.0, "reserving")))
    body = json.loads(chunk.removeprefix(b"data: "))
    assert body["choices"] == []
    assert body["agentmesh"] == {
        "session_id": "s1",
        "turn_id": "t1",
        "tool_call": {
            "phase": "progress",
            "id": "t-1-0",
            "name": "warehouse__reorder",
            "progress": 2.0,
            "total": 3.0,
            "message": "reserving",
        },
    }
