"""Converse turns from a client's side: build StartTurn/CancelTurn, read a turn up to its TurnCompleted."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, TypeVar, cast

import grpc.aio

from agentmesh.agent.v1 import agent_pb2, agent_pb2_grpc
from agentmesh.common.v1 import common_pb2

NO_TOOLS = agent_pb2.ToolChoice(mode=agent_pb2.TOOL_CHOICE_MODE_NONE)

ConverseCall = grpc.aio.StreamStreamCall[agent_pb2.ConverseRequest, agent_pb2.ConverseResponse]
_Response = TypeVar("_Response")


def start(
    message: str,
    *,
    turn_id: str = "",
    session_id: str = "",
    max_tokens: int = 8,
    tool_choice: agent_pb2.ToolChoice = NO_TOOLS,
    system_prompt: str = "",
) -> agent_pb2.ConverseRequest:
    turn = agent_pb2.StartTurn(
        message=message,
        system_prompt=system_prompt,
        turn_id=turn_id,
        session_id=session_id,
        tool_choice=tool_choice,
        sampling=common_pb2.SamplingParams(max_tokens=max_tokens),
    )
    return agent_pb2.ConverseRequest(start_turn=turn)


def named_tool(name: str) -> agent_pb2.ToolChoice:
    return agent_pb2.ToolChoice(mode=agent_pb2.TOOL_CHOICE_MODE_NAMED, tool_name=name)


def cancel(turn_id: str) -> agent_pb2.ConverseRequest:
    return agent_pb2.ConverseRequest(cancel_turn=agent_pb2.CancelTurn(turn_id=turn_id))


async def next_message(call: grpc.aio.StreamStreamCall[Any, _Response]) -> _Response:
    """The stream's next message; a stream that has ended fails the test (grpc types ``read`` as ``object | R``)."""
    message = await call.read()
    assert message is not grpc.aio.EOF, "the stream ended"
    return cast(_Response, message)


async def read_turn(call: ConverseCall, within_s: float = 30.0) -> list[agent_pb2.ConverseResponse]:
    """Every event up to and including the next TurnCompleted; a stream that ends first fails the test."""
    events: list[agent_pb2.ConverseResponse] = []
    async with asyncio.timeout(within_s):
        while not events or not events[-1].HasField("turn_completed"):
            event = await call.read()
            assert isinstance(event, agent_pb2.ConverseResponse), f"the stream ended before TurnCompleted: {events}"
            events.append(event)
    return events


async def one_turn(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
    request: agent_pb2.ConverseRequest,
    metadata: Sequence[tuple[str, str]],
    within_s: float = 30.0,
) -> list[agent_pb2.ConverseResponse]:
    """One turn on its own Converse stream, closed cleanly afterwards."""
    call = stub.Converse(metadata=tuple(metadata), timeout=within_s)
    await call.write(request)
    events = await read_turn(call, within_s)
    await call.done_writing()
    assert await call.code() == grpc.StatusCode.OK
    return events


def completed(events: Sequence[agent_pb2.ConverseResponse]) -> agent_pb2.TurnCompleted:
    return events[-1].turn_completed


def text(events: Sequence[agent_pb2.ConverseResponse]) -> str:
    return "".join(e.text_delta.text for e in events if e.HasField("text_delta"))
