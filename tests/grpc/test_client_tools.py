"""Client-defined tools on the router: handed out, waited for, answered from, recorded, and every bad input refused.

Real grpc.aio servers on loopback, simulator replicas, the real tool executor and real Redis. The simulator fills
a named tool's arguments with placeholder values, so these tests name the client tool; which tool a message
needs is the planner's (tested on the real model in tests/e2e/test_router_vllm.py).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import grpc
import pytest
import redis.asyncio as aioredis
from google.rpc import status_pb2

from agentmesh.agent.v1 import agent_pb2, agent_pb2_grpc
from agentmesh.common.v1 import common_pb2
from agentmesh_client import AgentClient, ClientToolCall, ClientToolResult, ToolCallFinished, client_tool
from meshkit.mesh import Mesh, start_mesh
from meshkit.turns import converse
from services.runtime.status_decode import rich_error_of_status

ORDER = client_tool(
    "get_order_status",
    "Look up the shipping status of a customer's order by its order number.",
    {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
)
NAMED = agent_pb2.ToolChoice(mode=agent_pb2.TOOL_CHOICE_MODE_NAMED, tool_name="get_order_status")


@pytest.fixture
async def mesh(redis_client: aioredis.Redis) -> AsyncIterator[Mesh]:
    m = await start_mesh(redis_client, replicas=1)
    yield m
    await m.close()


def start(**fields: object) -> agent_pb2.StartTurn:
    """A turn naming the client tool, with ``fields`` replaced."""
    turn = agent_pb2.StartTurn(message="where is my order A-1234?", tool_choice=NAMED, client_tools=[ORDER])
    for name, value in fields.items():
        if isinstance(value, list):
            turn.ClearField(name)  # type: ignore[arg-type]
            getattr(turn, name).extend(value)
        elif isinstance(value, agent_pb2.ToolChoice):
            turn.tool_choice.CopyFrom(value)
        else:
            setattr(turn, name, value)
    return turn


class Stream:
    """One Converse stream read event by event, so a test can answer in the middle of a turn."""

    def __init__(self, stub: agent_pb2_grpc.AgentServiceAsyncStub) -> None:
        self.call = stub.Converse()
        self.events: list[agent_pb2.ConverseResponse] = []

    async def send(self, request: agent_pb2.ConverseRequest) -> None:
        await self.call.write(request)

    async def until(self, kind: str) -> agent_pb2.ConverseResponse:
        while True:
            event = await asyncio.wait_for(self.call.read(), 30)
            assert isinstance(event, agent_pb2.ConverseResponse), f"stream ended before {kind}"
            self.events.append(event)
            if event.WhichOneof("event") == kind:
                return event

    async def close(self) -> None:
        await self.call.done_writing()
        assert await self.call.code() == grpc.StatusCode.OK


def results(turn_id: str, *answers: ClientToolResult) -> agent_pb2.ConverseRequest:
    submitted = agent_pb2.SubmitToolResults(turn_id=turn_id, results=[a.to_proto() for a in answers])
    return agent_pb2.ConverseRequest(tool_results=submitted)


def error_of(done: agent_pb2.TurnCompleted) -> tuple[str, list[str]]:
    error = rich_error_of_status(status_pb2.Status.FromString(done.status))
    return error.code.name, [v.field for v in error.field_violations]


async def test_a_client_call_is_handed_out_answered_on_the_stream_and_recorded(mesh: Mesh) -> None:
    stub = await mesh.add_router()
    stream = Stream(stub)
    await stream.send(agent_pb2.ConverseRequest(start_turn=start(turn_id="order-1")))
    started = (await stream.until("tool_call_started")).tool_call_started
    handed = (await stream.until("client_tool_calls")).client_tool_calls
    assert started.client_side and started.tool_name == "get_order_status"
    assert [c.call_id for c in handed.calls] == [started.call_id] and handed.turn_id == "order-1"
    assert handed.round == 1 and handed.wait.ToNanoseconds() > 0
    assert isinstance(json.loads(handed.calls[0].arguments_json), dict)
    output = '{"status": "shipped", "eta": "Friday"}'
    await stream.send(results("order-1", ClientToolResult(started.call_id, output)))
    finished = (await stream.until("tool_call_finished")).tool_call_finished
    done = (await stream.until("turn_completed")).turn_completed
    await stream.close()
    assert finished.call_id == started.call_id and finished.status == common_pb2.TOOL_CALL_STATUS_OK
    assert finished.output_json == output
    assert done.finish_reason == common_pb2.FINISH_REASON_STOP and done.tool_rounds == 1
    assert any(e.HasField("text_delta") for e in stream.events)
    session_id = stream.events[0].turn_accepted.session_id
    turn = (await stub.GetSession(agent_pb2.GetSessionRequest(session_id=session_id))).session.turns[0]
    assert [(c.tool_name, c.output_json) for c in turn.tool_calls] == [("get_order_status", output)]


async def test_a_client_error_reaches_the_model_and_a_failed_result_is_a_failed_call(mesh: Mesh) -> None:
    stub = await mesh.add_router()
    stream = Stream(stub)
    await stream.send(agent_pb2.ConverseRequest(start_turn=start(turn_id="order-2")))
    handed = (await stream.until("client_tool_calls")).client_tool_calls
    await stream.send(results("order-2", ClientToolResult(handed.calls[0].call_id, error="order service is down")))
    finished = (await stream.until("tool_call_finished")).tool_call_finished
    done = (await stream.until("turn_completed")).turn_completed
    await stream.close()
    assert finished.status == common_pb2.TOOL_CALL_STATUS_FAILED
    assert finished.error_message == "order service is down"
    assert done.finish_reason == common_pb2.FINISH_REASON_STOP


async def test_a_turn_can_end_at_its_client_calls_and_the_next_answers_from_their_results(mesh: Mesh) -> None:
    stub = await mesh.add_router()
    first = await converse(stub, start(end_at_client_calls=True, only_client_tools=True))
    assert first.kinds() == ["turn_accepted", "tool_call_started", "client_tool_calls", "turn_completed"]
    assert first.completed.finish_reason == common_pb2.FINISH_REASON_TOOL_CALLS and not first.completed.status
    call = next(e.client_tool_calls.calls[0] for e in first.events if e.HasField("client_tool_calls"))
    prior = agent_pb2.PriorToolCall(
        call_id=call.call_id, tool_name=call.tool_name, arguments_json=call.arguments_json, output="shipped Friday"
    )
    bare = await converse(stub, start(only_client_tools=True, tool_choice=agent_pb2.ToolChoice()))
    second = await converse(
        stub,
        start(
            end_at_client_calls=True,
            only_client_tools=True,
            prior_tool_calls=[prior],
            history=[agent_pb2.HistoryTurn(user_message="hi", answer="Hello! How can I help?")],
        ),
    )
    kinds = second.kinds()
    assert "client_tool_calls" not in kinds and "tool_call_started" not in kinds
    assert second.completed.finish_reason == common_pb2.FINISH_REASON_STOP and second.text
    # The answer's prompt holds the history and the result (the simulator's answer does not read it).
    assert second.completed.usage.prompt_tokens > bare.completed.usage.prompt_tokens + 8


async def test_the_wait_for_results_is_bounded_and_a_late_result_is_dropped(mesh: Mesh) -> None:
    stub = await mesh.add_router(client_tool_wait_s=0.3)
    stream = Stream(stub)
    await stream.send(agent_pb2.ConverseRequest(start_turn=start(turn_id="order-3")))
    handed = (await stream.until("client_tool_calls")).client_tool_calls
    finished = (await stream.until("tool_call_finished")).tool_call_finished
    assert finished.status == common_pb2.TOOL_CALL_STATUS_TIMEOUT and "no result" in finished.error_message
    assert (await stream.until("turn_completed")).turn_completed.finish_reason == common_pb2.FINISH_REASON_STOP
    # A result after the turn is over is dropped; the stream carries the next turn.
    await stream.send(results("order-3", ClientToolResult(handed.calls[0].call_id, "late")))
    none = agent_pb2.ToolChoice(mode=agent_pb2.TOOL_CHOICE_MODE_NONE)
    await stream.send(agent_pb2.ConverseRequest(start_turn=start(turn_id="order-4", tool_choice=none)))
    done = (await stream.until("turn_completed")).turn_completed
    assert done.turn_id == "order-4" and done.finish_reason == common_pb2.FINISH_REASON_STOP
    await stream.close()


async def test_a_waiting_turn_is_cancelled_and_a_result_for_no_such_call_ends_the_turn(mesh: Mesh) -> None:
    stub = await mesh.add_router()
    stream = Stream(stub)
    await stream.send(agent_pb2.ConverseRequest(start_turn=start(turn_id="order-5")))
    await stream.until("client_tool_calls")
    await stream.send(agent_pb2.ConverseRequest(cancel_turn=agent_pb2.CancelTurn(turn_id="order-5")))
    done = (await stream.until("turn_completed")).turn_completed
    assert done.finish_reason == common_pb2.FINISH_REASON_ABORTED
    await stream.send(agent_pb2.ConverseRequest(start_turn=start(turn_id="order-6")))
    await stream.until("client_tool_calls")
    await stream.send(results("order-6", ClientToolResult("no-such-call", "x")))
    done = (await stream.until("turn_completed")).turn_completed
    assert done.finish_reason == common_pb2.FINISH_REASON_ERROR
    assert error_of(done) == ("INVALID_ARGUMENT", ["tool_results.results[0].call_id"])
    await stream.close()


BAD: list[tuple[dict[str, object], str]] = [
    (
        {"client_tools": [client_tool("clock", "shadows the mesh's clock", {"type": "object"})]},
        "start_turn.client_tools[0].name",
    ),
    ({"client_tools": [ORDER, ORDER]}, "start_turn.client_tools[1].name"),
    ({"client_tools": [client_tool("bad name!", "x", {"type": "object"})]}, "start_turn.client_tools[0].name"),
    (
        {"client_tools": [common_pb2.ToolSpec(name="t", parameters_json_schema='{"type": "array"}')]},
        "start_turn.client_tools[0].parameters_json_schema",
    ),
    (
        {"client_tools": [common_pb2.ToolSpec(name="t", parameters_json_schema='{"type": "object", "properties": 3}')]},
        "start_turn.client_tools[0].parameters_json_schema",
    ),
    (
        {"client_tools": [common_pb2.ToolSpec(name="t", parameters_json_schema="{not json")]},
        "start_turn.client_tools[0].parameters_json_schema",
    ),
    ({"client_tools": [common_pb2.ToolSpec(name="t", idempotent=True)]}, "start_turn.client_tools[0].idempotent"),
    ({"session_id": "s1", "history": [agent_pb2.HistoryTurn(user_message="a", answer="b")]}, "start_turn.history"),
    (
        {"prior_tool_calls": [agent_pb2.PriorToolCall(call_id="c1", tool_name="clock", arguments_json="{}")]},
        "start_turn.prior_tool_calls[0].tool_name",
    ),
    ({"max_calls_per_round": 1000}, "start_turn.max_calls_per_round"),
    (
        {"tool_choice": agent_pb2.ToolChoice(mode=agent_pb2.TOOL_CHOICE_MODE_NAMED, tool_name="nope")},
        "start_turn.tool_choice.tool_name",
    ),
]


async def test_bad_client_tools_are_refused_naming_the_field(mesh: Mesh) -> None:
    stub = await mesh.add_router(max_client_tools=4)  # one router for every case: each start embeds its cards
    for change, field in BAD:
        result = await converse(stub, start(**change))
        assert result.kinds() == ["turn_completed"], change
        code, fields = error_of(result.completed)
        assert code == "INVALID_ARGUMENT" and field in fields, (change, fields)
    tools = [client_tool(f"t{i}", "a tool", {"type": "object"}) for i in range(5)]
    result = await converse(stub, start(client_tools=tools, tool_choice=agent_pb2.ToolChoice()))
    assert error_of(result.completed) == ("INVALID_ARGUMENT", ["start_turn.client_tools"])


async def test_through_a_gateway_the_python_client_runs_its_tools_with_a_handler(mesh: Mesh) -> None:
    await mesh.add_router()
    _, _, server = await mesh.add_gateway()
    asked: list[ClientToolCall] = []

    async def handler(call: ClientToolCall) -> object:
        asked.append(call)
        return {"status": "shipped", "order": call.arguments.get("order_id")}

    async with grpc.aio.insecure_channel(server.address) as channel:
        client = AgentClient(channel).with_key("acme-secret-key")
        async with client.conversation() as conversation:
            turn = client.turn(
                conversation,
                "where is my order A-1234?",
                tools="get_order_status",
                client_tools=[ORDER],
                tool_handler=handler,
            )
            result = await turn.collect()
    kinds = [type(e).__name__ for e in result.events]
    assert kinds.index("ToolCallStarted") < kinds.index("ClientToolCalls") < kinds.index("ToolCallFinished")
    finished = next(e for e in result.events if isinstance(e, ToolCallFinished))
    assert [c.call_id for c in asked] == [finished.call_id] and finished.status == "ok"
    assert json.loads(finished.output_json)["status"] == "shipped"
    assert result.completed.finish_reason == "stop"
