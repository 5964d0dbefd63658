"""Converse turns from a client's side: build StartTurn/CancelTurn, read a turn up to its TurnCompleted."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import grpc.aio

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2

NO_TOOLS = agent_pb2.ToolChoice(mode=agent_pb2.TOOL_CHOICE_MODE_NONE)


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


async def read_turn(call: Any, within_s: float = 30.0) -> list[agent_pb2.ConverseResponse]:
    """Every event up to and including the next TurnCompleted; a stream that ends first fails the test."""
    events: list[agent_pb2.ConverseResponse] = []
    async with asyncio.timeout(within_s):
        while not events or not events[-1].HasField("turn_completed"):
            event = await call.read()
            assert event is not grpc.aio.EOF, f"the stream ended before TurnCompleted: {events}"
            events.append(event)
    return events


async def one_turn(
    stub: Any, request: agent_pb2.ConverseRequest, metadata: Sequence[tuple[str, str]], within_s: float = 30.0
) -> list[agent_pb2.ConverseResponse]:
    """One turn on its own Converse stream, closed cleanly afterwards."""
    call: Any = stub.Converse(metadata=tuple(metadata), timeout=within_s)
    await call.write(request)
    events = await read_turn(call, within_s)
    await call.done_writing()
    assert await call.code() == grpc.StatusCode.OK
    return events


def completed(events: Sequence[agent_pb2.ConverseResponse]) -> agent_pb2.TurnCompleted:
    return events[-1].turn_completed


def text(events: Sequence[agent_pb2.ConverseResponse]) -> str:
    return "".join(e.text_delta.text for e in events if e.HasField("text_delta"))
