"""A scriptable AgentService for testing the shared runtime on the real contracts.

Complete's prompt is a command, so one servicer exercises every runtime path:

- ``echo:<text>``      stream the words of <text> back, one delta each
- ``sleep:<seconds>``  stream "tick" deltas for that long (a long stream)
- ``hang``             block until cancelled (records the cancellation)
- ``fail:internal``    raise a plain exception carrying a secret
- ``fail:invalid``     raise InvalidArgument on field "prompt"
- ``fail:exhausted``   raise ResourceExhausted with a 2.5 s retry hint
- ``forward:<addr>:<command>``  call Complete on <addr> with the downstream
                       timeout and relay its stream (a second hop)
- ``big:<n>``          one delta of n bytes

Converse echoes each StartTurn's message as one TextDelta. Observations
(remaining time, cancellations) are recorded on the servicer for assertions.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import grpc
import grpc.aio
from opentelemetry import trace

from agentmesh.agent.v1 import agent_pb2, agent_pb2_grpc
from services.runtime.channel import create_channel
from services.runtime.context import current_request_id
from services.runtime.deadline import downstream_timeout
from services.runtime.errors import InvalidArgument, ResourceExhausted, Unavailable
from services.runtime.server import Service

SERVICE_NAME = agent_pb2.DESCRIPTOR.services_by_name["AgentService"].full_name


@dataclass
class Observations:
    """What the probe saw while serving."""

    remaining: list[float | None] = field(default_factory=list)
    request_ids: list[str] = field(default_factory=list)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    completed: int = 0


class ProbeAgent(agent_pb2_grpc.AgentServiceServicer):
    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self.seen = Observations()
        self._tracer_provider = tracer_provider
        #: ListTools fails with UNAVAILABLE this many times before answering (retry tests).
        self.list_tools_failures = 0
        self.list_tools_calls = 0

    def service(self) -> Service:
        return Service(SERVICE_NAME, lambda server: agent_pb2_grpc.add_AgentServiceServicer_to_server(self, server))

    async def Complete(
        self, request: agent_pb2.CompleteRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> AsyncIterator[agent_pb2.CompleteResponse]:
        self.seen.remaining.append(context.time_remaining())
        self.seen.request_ids.append(current_request_id())
        self.seen.started.set()
        command, _, arg = request.prompt.partition(":")
        try:
            if command == "echo":
                for word in arg.split():
                    yield delta(word)
            elif command == "sleep":
                end = asyncio.get_running_loop().time() + float(arg)
                while asyncio.get_running_loop().time() < end:
                    await asyncio.sleep(0.05)
                    yield delta("tick")
            elif command == "hang":
                await asyncio.sleep(3600)
            elif command == "fail":
                if arg == "invalid":
                    raise InvalidArgument.field("prompt", "must not say fail:invalid")
                if arg == "exhausted":
                    raise ResourceExhausted("too many requests", retry_after_s=2.5)
                raise RuntimeError("secret-internal-detail")
            elif command == "forward":
                host, port, rest = arg.split(":", 2)
                async with create_channel(f"{host}:{port}", tracer_provider=self._tracer_provider) as channel:
                    stub = agent_pb2_grpc.AgentServiceStub(channel)
                    call = stub.Complete(agent_pb2.CompleteRequest(prompt=rest), timeout=downstream_timeout())
                    async for message in call:
                        yield message
            elif command == "big":
                yield delta("x" * int(arg))
            else:
                raise InvalidArgument.field("prompt", f"unknown probe command {command!r}")
            self.seen.completed += 1
        except asyncio.CancelledError:
            self.seen.cancelled.set()
            raise

    async def Converse(
        self,
        request_iterator: AsyncIterator[agent_pb2.ConverseRequest],
        context: grpc.aio.ServicerContext[object, object],
    ) -> AsyncIterator[agent_pb2.ConverseResponse]:
        async for request in request_iterator:
            if request.HasField("start_turn"):
                yield agent_pb2.ConverseResponse(text_delta=agent_pb2.TextDelta(text=request.start_turn.message))

    async def GetSession(
        self, request: agent_pb2.GetSessionRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> agent_pb2.GetSessionResponse:
        return agent_pb2.GetSessionResponse(session=agent_pb2.Session(session_id=request.session_id))

    async def ListTools(
        self, request: agent_pb2.ListToolsRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> agent_pb2.ListToolsResponse:
        self.list_tools_calls += 1
        if self.list_tools_failures > 0:
            self.list_tools_failures -= 1
            raise Unavailable("warming up", retry_after_s=0.05)
        return agent_pb2.ListToolsResponse()


def delta(text: str) -> agent_pb2.CompleteResponse:
    return agent_pb2.CompleteResponse(text_delta=agent_pb2.TextDelta(text=text))
