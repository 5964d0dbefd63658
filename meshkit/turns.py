"""Converse turns from the caller's side: one turn on a fresh stream, read up to its TurnCompleted."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from agentmesh.agent.v1 import agent_pb2, agent_pb2_grpc


@dataclass
class TurnResult:
    events: list[agent_pb2.ConverseResponse]

    @property
    def accepted(self) -> agent_pb2.TurnAccepted:
        return next(e.turn_accepted for e in self.events if e.HasField("turn_accepted"))

    @property
    def text(self) -> str:
        return "".join(e.text_delta.text for e in self.events if e.HasField("text_delta"))

    @property
    def completed(self) -> agent_pb2.TurnCompleted:
        return next(e.turn_completed for e in self.events if e.HasField("turn_completed"))

    def kinds(self) -> list[str]:
        return [str(e.WhichOneof("event")) for e in self.events]


async def converse(
    stub: agent_pb2_grpc.AgentServiceAsyncStub,
    start: agent_pb2.StartTurn,
    *,
    metadata: Sequence[tuple[str, str]] = (),
) -> TurnResult:
    """One turn on a fresh Converse stream; returns every event up to TurnCompleted."""
    call = stub.Converse(metadata=tuple(metadata))
    await call.write(agent_pb2.ConverseRequest(start_turn=start))
    events = []
    while True:
        event = await asyncio.wait_for(call.read(), 30)
        assert isinstance(event, agent_pb2.ConverseResponse), "stream ended before TurnCompleted"
        events.append(event)
        if event.HasField("turn_completed"):
            break
    await call.done_writing()
    await call.code()
    return TurnResult(events)
