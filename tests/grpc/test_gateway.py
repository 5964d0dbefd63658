"""The gateway in front of routers (in-process mesh with simulators, real Redis): policy and forwarding."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
import pytest
import redis.asyncio as aioredis
from google.rpc import status_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from meshkit.mesh import Mesh, start_mesh
from meshkit.turns import converse
from services.runtime.metrics import Metrics
from services.runtime.status_decode import rich_error_of, rich_error_of_status
from tests.support.turns import next_message

NONE = agent_pb2.ToolChoice(mode=agent_pb2.TOOL_CHOICE_MODE_NONE)
ACME = (("authorization", "Bearer acme-secret-key"),)
OTHER = (("authorization", "Bearer other-secret-key"),)


@pytest.fixture
async def mesh(redis_client: aioredis.Redis) -> AsyncIterator[Mesh]:
    m = await start_mesh(redis_client, replicas=2)
    await m.add_router()
    yield m
    await m.close()


async def test_auth_is_required_but_health_and_reflection_stay_open(mesh: Mesh) -> None:
    stub, _, server = await mesh.add_gateway()
    for metadata, message in (
        ((), "missing credentials"),
        ((("authorization", "Bearer nope-nope-nope"),), "invalid API key"),
        ((("authorization", "Basic x"),), "missing credentials"),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.ListTools(agent_pb2.ListToolsRequest(), metadata=metadata)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED and message in (err.value.details() or "")
    async with grpc.aio.insecure_channel(server.address) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    tools = (await stub.ListTools(agent_pb2.ListToolsRequest(), metadata=ACME)).tools
    assert "calculator" in {t.name for t in tools}


async def test_converse_and_complete_are_forwarded_with_the_tenant(mesh: Mesh) -> None:
    stub, _, _ = await mesh.add_gateway()
    turn = await converse(stub, agent_pb2.StartTurn(message="hello", tool_choice=NONE), metadata=ACME)
    assert turn.completed.usage.completion_tokens > 0 and turn.text
    sid = turn.accepted.session_id
    session = (await stub.GetSession(agent_pb2.GetSessionRequest(session_id=sid), metadata=ACME)).session
    assert [t.user_message for t in session.turns] == ["hello"]
    with pytest.raises(grpc.aio.AioRpcError) as err:  # another tenant never sees it
        await stub.GetSession(agent_pb2.GetSessionRequest(session_id=sid), metadata=OTHER)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    out = [m async for m in stub.Complete(agent_pb2.CompleteRequest(prompt="hi"), metadata=ACME)]
    assert out[0].HasField("started") and out[-1].HasField("finished")
    # A turn the router rejects reaches the client with its rich details, in its TurnCompleted.
    call = stub.Converse(metadata=ACME)
    await call.write(agent_pb2.ConverseRequest(start_turn=agent_pb2.StartTurn(message=" ")))
    done = (await next_message(call)).turn_completed
    rich = rich_error_of_status(status_pb2.Status.FromString(done.status))
    assert [v.field for v in rich.field_violations] == ["start_turn.message"]
    await call.done_writing()
    assert await call.code() == grpc.StatusCode.OK


async def test_rate_limit_rejects_with_retry_info_and_is_shared_by_two_gateways(mesh: Mesh) -> None:
    limits: dict[str, Any] = {"rate_rps": 0.5, "rate_burst": 3.0}
    first, _, _ = await mesh.add_gateway(**limits)
    second, _, _ = await mesh.add_gateway(**limits)
    request = agent_pb2.CompleteRequest(prompt="hi", sampling=common_pb2.SamplingParams(max_tokens=2))
    statuses = []
    for stub in (first, second, first, second):
        try:
            [m async for m in stub.Complete(request, metadata=ACME)]
            statuses.append("ok")
        except grpc.aio.AioRpcError as exc:
            statuses.append(exc.code().name)
            rejected = exc
    assert statuses == ["ok", "ok", "ok", "RESOURCE_EXHAUSTED"]  # one budget of 3 across both gateways
    rich = rich_error_of(rejected)
    assert rich.reason == "RATE_LIMITED" and rich.retry_after_s is not None and 0 < rich.retry_after_s <= 2.1
    assert 0 < int(dict(rejected.trailing_metadata())["grpc-retry-pushback-ms"]) <= 2100
    # Another tenant has its own budget.
    [m async for m in first.Complete(request, metadata=OTHER)]


async def test_token_budget_is_charged_after_the_answer(mesh: Mesh) -> None:
    # A burst smaller than any answered request (the system prompt alone is more): the first is admitted with
    # the bucket positive and charged after its answer, which takes the bucket negative whatever the prompt.
    stub, _, _ = await mesh.add_gateway(rate_token_burst=5.0, rate_tokens_per_min=1.0)
    request = agent_pb2.CompleteRequest(prompt="hi")
    [m async for m in stub.Complete(request, metadata=ACME)]
    with pytest.raises(grpc.aio.AioRpcError) as err:
        [m async for m in stub.Complete(request, metadata=ACME)]
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert rich_error_of(err.value).retry_after_s > 60  # type: ignore[operator]


async def test_session_affinity_and_failover_before_the_turn(mesh: Mesh) -> None:
    await mesh.add_router()
    stub, gateway, _ = await mesh.add_gateway()
    await asyncio.sleep(1.2)  # both routers reported healthy
    first = await converse(stub, agent_pb2.StartTurn(message="start", tool_choice=NONE), metadata=ACME)
    sid = first.accepted.session_id
    home = gateway.routers.order(sid)[0]
    served = {
        target: router.metrics.turns.labels("completed")._value.get()
        for router, server, _ in mesh.routers
        for target in [server.address]
    }
    for _ in range(3):
        await converse(stub, agent_pb2.StartTurn(session_id=sid, message="more", tool_choice=NONE), metadata=ACME)
    after = {
        server.address: router.metrics.turns.labels("completed")._value.get() for router, server, _ in mesh.routers
    }
    assert after[home] - served[home] == 3 and sum(after.values()) - sum(served.values()) == 3
    # The home router dies: the next turn fails over before it starts, invisibly.
    dead = next((r, s) for r, s, _ in mesh.routers if s.address == home)
    await dead[1].drain(grace=0)
    turn = await converse(
        stub, agent_pb2.StartTurn(session_id=sid, message="still there?", tool_choice=NONE), metadata=ACME
    )
    assert turn.completed.usage.completion_tokens > 0
    assert turn.completed.usage.prompt_tokens > first.completed.usage.prompt_tokens  # history came along (Redis)


@contextlib.asynccontextmanager
async def traced_mesh(redis_client: aioredis.Redis, replicas: int) -> AsyncIterator[tuple[Any, InMemorySpanExporter]]:
    """A gateway → router mesh whose every hop records spans into one exporter (cleared before it is handed over)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    mesh = await start_mesh(redis_client, replicas=replicas, tracer_provider=provider)
    try:
        await mesh.add_router()
        stub, _, _ = await mesh.add_gateway(tracer_provider=provider)
        exporter.clear()
        yield stub, exporter
    finally:
        await mesh.close()


async def test_one_trace_per_turn_across_every_hop(redis_client: aioredis.Redis) -> None:
    async with traced_mesh(redis_client, replicas=2) as (stub, exporter):
        choice = agent_pb2.ToolChoice(mode=agent_pb2.TOOL_CHOICE_MODE_NAMED, tool_name="calculator")
        # A word problem, so that the fill is a generation ("2+2" or "two plus two" would be copied, with none).
        ask = agent_pb2.StartTurn(message="I buy 3 pens at $2 each: what do they cost?", tool_choice=choice)
        turn = await converse(stub, ask, metadata=ACME)
        await asyncio.sleep(0.2)
        spans = [s for s in exporter.get_finished_spans() if s.context.trace_id == int(turn.accepted.trace_id, 16)]
        names = [s.name for s in spans]
        for expected in (
            "agentmesh.agent.v1.AgentService/Converse",
            "agent.turn",
            "agent.plan",
            "agent.generation",
            "agent.answer",
            "agent.tool_call",
            "tool.execute",
            "inference.generate",
        ):
            assert expected in names, (expected, sorted(set(names)))
        by_id = {s.context.span_id: s for s in spans}

        def ancestors(span: Any) -> list[str]:
            chain = []
            while span.parent is not None and span.parent.span_id in by_id:
                span = by_id[span.parent.span_id]
                chain.append(span.name)
            return chain

        gateway_server = [s for s in spans if s.name.endswith("/Converse") and s.kind.name == "SERVER"]
        assert len(gateway_server) == 2  # the gateway's and the router's
        tool = next(s for s in spans if s.name == "tool.execute")
        assert ancestors(tool)[:2] == ["agent.tool_call", "agent.turn"]
        assert ancestors(tool)[-1].endswith("/Converse")  # rooted in the gateway's server span
        for gen in (s for s in spans if s.name == "inference.generate"):
            assert "agent.turn" in ancestors(gen)


async def test_a_complete_is_one_trace_gateway_server_client_router_server(redis_client: aioredis.Redis) -> None:
    # The gateway's router channels carry no tracing interceptors: its CLIENT span is made by the servicer.
    async with traced_mesh(redis_client, replicas=1) as (stub, exporter):
        events = [m async for m in stub.Complete(agent_pb2.CompleteRequest(prompt="hi"), metadata=ACME)]
        trace_id = int(events[0].started.trace_id, 16)
        method = "agentmesh.agent.v1.AgentService/Complete"
        spans = [s for s in exporter.get_finished_spans() if s.context.trace_id == trace_id and s.name == method]
        by_id = {s.context.span_id: s for s in spans}
        router_server = next(s for s in spans if s.kind.name == "SERVER" and s.parent and s.parent.span_id in by_id)
        client = by_id[router_server.parent.span_id]  # type: ignore[union-attr]
        assert client.kind.name == "CLIENT" and (client.attributes or {}).get("rpc.grpc.status_code") == 0
        gateway_server = by_id[client.parent.span_id]  # type: ignore[union-attr]
        assert gateway_server.kind.name == "SERVER" and len(spans) == 3


async def test_overload_keeps_p0_within_slo_and_sheds_p2(redis_client: aioredis.Redis) -> None:
    from dataclasses import replace

    from meshkit.mesh import FAST_SIM

    # Each request takes ~0.2 s on the simulator; 4 slots → capacity ~20 req/s; offered ~60 req/s for 1 s.
    sim = replace(FAST_SIM, output_tokens=20, decode_base_s=0.01, max_batch=64)
    mesh = await start_mesh(redis_client, replicas=2, sim=sim)
    try:
        await mesh.add_router(response_cache_ttl_s=0)
        metrics = Metrics()
        stub, gateway, _ = await mesh.add_gateway(
            rate_rps=1000.0,
            rate_burst=1000.0,
            rate_window_max=100_000,
            concurrency_initial=4.0,
            concurrency_min=4.0,
            concurrency_max=4.0,
            slo_p0_s=1.5,
            slo_p1_s=1.0,
            slo_p2_s=0.3,
            metrics=metrics,
        )
        results: dict[int, list[tuple[str, float]]] = {0: [], 1: [], 2: []}

        async def one(priority: int, i: int) -> None:
            request = agent_pb2.CompleteRequest(prompt=f"load {priority} {i}", priority=priority + 1)  # type: ignore[arg-type]
            start = time.monotonic()
            try:
                messages = [m async for m in stub.Complete(request, metadata=ACME, timeout=20)]
                assert messages[-1].HasField("finished")
                results[priority].append(("ok", time.monotonic() - start))
            except grpc.aio.AioRpcError as exc:
                results[priority].append((exc.code().name, time.monotonic() - start))

        tasks = []
        for i in range(60):
            tasks.append(asyncio.create_task(one(i % 3, i)))
            await asyncio.sleep(1 / 60)
        await asyncio.wait_for(asyncio.gather(*tasks), 30)  # no stream hangs
        codes = {p: [c for c, _ in results[p]] for p in results}
        print({f"P{p}": {c: cs.count(c) for c in set(cs)} for p, cs in codes.items()})
        assert all(c in ("ok", "RESOURCE_EXHAUSTED") for cs in codes.values() for c in cs), codes
        assert codes[2].count("RESOURCE_EXHAUSTED") > codes[0].count("RESOURCE_EXHAUSTED")
        assert codes[2].count("RESOURCE_EXHAUSTED") >= 5
        assert codes[0].count("ok") >= 15
        admitted = sum(
            metrics.registry.get_sample_value(
                "agentmesh_gateway_admission_total", {"priority": f"P{p}", "outcome": "admitted"}
            )
            or 0
            for p in range(3)
        )
        assert admitted == sum(cs.count("ok") for cs in codes.values())  # nothing admitted was lost
        assert gateway.admission.in_flight == 0 and gateway.admission.queued() == 0
        # Every admitted P0 waited within its 1.5 s SLO.
        p0_waits = metrics.registry.get_sample_value("agentmesh_gateway_queue_wait_seconds_count", {"priority": "P0"})
        p0_within = metrics.registry.get_sample_value(
            "agentmesh_gateway_queue_wait_seconds_bucket", {"priority": "P0", "le": "2.5"}
        )
        assert p0_waits == p0_within == codes[0].count("ok")
    finally:
        await mesh.close()
