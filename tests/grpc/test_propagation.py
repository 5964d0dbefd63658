"""Across two hops: deadlines, cancellation and one trace (client → A → B)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc
import grpc.aio
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from agentmesh.agent.v1 import agent_pb2, agent_pb2_grpc
from tests.conftest import StartServer
from tests.support.probe_agent import ProbeAgent

OpenChannel = Callable[..., grpc.aio.Channel]


async def two_hops(
    start_server: StartServer, tracer_provider: TracerProvider | None = None
) -> tuple[ProbeAgent, ProbeAgent, str, str]:
    a, b = ProbeAgent(tracer_provider), ProbeAgent(tracer_provider)
    server_a = await start_server([a.service()], tracer_provider=tracer_provider)
    server_b = await start_server([b.service()], tracer_provider=tracer_provider)
    return a, b, server_a.address, server_b.address


async def test_deadline_propagates_across_two_hops(start_server: StartServer, open_channel: OpenChannel) -> None:
    a, b, addr_a, addr_b = await two_hops(start_server)
    stub = agent_pb2_grpc.AgentServiceStub(open_channel(addr_a))
    call = stub.Complete(agent_pb2.CompleteRequest(prompt=f"forward:{addr_b}:echo:one two"), timeout=5.0)
    assert [m.text_delta.text async for m in call] == ["one", "two"]
    (seen_a,), (seen_b,) = a.seen.remaining, b.seen.remaining
    assert seen_a is not None and seen_b is not None
    # gRPC core computes time remaining from a clock it caches per callback batch, which can lag by
    # milliseconds under load (5.0095 s was seen with timeout=5.0): allow that, nothing more.
    assert 0 < seen_b <= seen_a <= 5.0 + 0.05


async def test_no_deadline_stays_no_deadline(start_server: StartServer, open_channel: OpenChannel) -> None:
    _, b, addr_a, addr_b = await two_hops(start_server)
    stub = agent_pb2_grpc.AgentServiceStub(open_channel(addr_a))
    await stub.Complete(agent_pb2.CompleteRequest(prompt=f"forward:{addr_b}:echo:x")).read()
    assert b.seen.remaining == [None]


async def test_expired_deadline_downstream_is_deadline_exceeded(
    start_server: StartServer, open_channel: OpenChannel
) -> None:
    _, b, addr_a, addr_b = await two_hops(start_server)
    stub = agent_pb2_grpc.AgentServiceStub(open_channel(addr_a))
    call = stub.Complete(agent_pb2.CompleteRequest(prompt=f"forward:{addr_b}:hang"), timeout=0.5)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call.read()
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    # B's handler was stopped by its own (inherited) deadline, not left hanging.
    await asyncio.wait_for(b.seen.cancelled.wait(), 5)


async def test_cancelling_upstream_cancels_downstream_handler(
    start_server: StartServer, open_channel: OpenChannel
) -> None:
    a, b, addr_a, addr_b = await two_hops(start_server)
    stub = agent_pb2_grpc.AgentServiceStub(open_channel(addr_a))
    call = stub.Complete(agent_pb2.CompleteRequest(prompt=f"forward:{addr_b}:hang"))
    await asyncio.wait_for(b.seen.started.wait(), 5)
    call.cancel()
    await asyncio.wait_for(a.seen.cancelled.wait(), 5)
    await asyncio.wait_for(b.seen.cancelled.wait(), 5)
    assert a.seen.completed == b.seen.completed == 0


async def test_one_trace_across_two_hops(
    start_server: StartServer,
    open_channel: OpenChannel,
    tracer_provider: TracerProvider,
    span_exporter: InMemorySpanExporter,
) -> None:
    _, _, addr_a, addr_b = await two_hops(start_server, tracer_provider)
    stub = agent_pb2_grpc.AgentServiceStub(open_channel(addr_a, tracer_provider=tracer_provider))
    call = stub.Complete(agent_pb2.CompleteRequest(prompt=f"forward:{addr_b}:echo:x"))
    assert [m async for m in call]
    for _ in range(50):  # client spans end from a done-callback task
        if len(span_exporter.get_finished_spans()) >= 4:
            break
        await asyncio.sleep(0.02)
    spans = span_exporter.get_finished_spans()
    kinds = sorted((s.kind.name, s.name) for s in spans)
    method = "agentmesh.agent.v1.AgentService/Complete"
    assert kinds == [("CLIENT", method), ("CLIENT", method), ("SERVER", method), ("SERVER", method)]
    assert len({s.context.trace_id for s in spans}) == 1
    by_id = {s.context.span_id: s for s in spans}
    # client → server A → client (in A) → server B: each span's parent is the previous one.
    chain = [s for s in spans if s.parent is None]
    assert len(chain) == 1 and chain[0].kind == SpanKind.CLIENT
    depth = 0
    current = chain[0]
    while True:
        children = [s for s in spans if s.parent is not None and s.parent.span_id == current.context.span_id]
        if not children:
            break
        (current,) = children
        depth += 1
    assert depth == 3 and current.kind == SpanKind.SERVER
    assert all(s.parent is None or s.parent.span_id in by_id for s in spans)
