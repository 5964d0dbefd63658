"""The shared runtime on real grpc.aio servers: health, drain, status mapping, limits."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentmesh.agent.v1 import agent_pb2, agent_pb2_grpc
from services.runtime.config import ServiceConfig
from services.runtime.metrics import Metrics
from services.runtime.status_decode import rich_error_of
from tests.conftest import StartServer
from tests.support.probe_agent import SERVICE_NAME, ProbeAgent

OpenChannel = Callable[..., grpc.aio.Channel]


async def collect(call: grpc.aio.UnaryStreamCall[Any, agent_pb2.CompleteResponse]) -> list[str]:
    return [m.text_delta.text async for m in call]


async def test_health_serving_then_not_serving_on_drain_while_stream_finishes(
    start_server: StartServer, open_channel: OpenChannel
) -> None:
    probe = ProbeAgent()
    server = await start_server([probe.service()])
    channel = open_channel(server.address)
    health = health_pb2_grpc.HealthStub(channel)
    stub = agent_pb2_grpc.AgentServiceStub(channel)
    assert (await health.Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME))).status == (
        health_pb2.HealthCheckResponse.SERVING
    )

    watch = health.Watch(health_pb2.HealthCheckRequest(service=SERVICE_NAME))
    assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
    long_stream = stub.Complete(agent_pb2.CompleteRequest(prompt="sleep:1.0"))
    await asyncio.wait_for(probe.seen.started.wait(), 5)

    drain = asyncio.create_task(server.drain(grace=10))
    assert (await asyncio.wait_for(watch.read(), 5)).status == health_pb2.HealthCheckResponse.NOT_SERVING
    watch.cancel()

    # New calls are refused while the in-flight stream is still running.
    await asyncio.sleep(0.1)
    assert not long_stream.done()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub.Complete(agent_pb2.CompleteRequest(prompt="echo:late")).read()
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE

    ticks = await collect(long_stream)
    assert await long_stream.code() == grpc.StatusCode.OK
    assert len(ticks) >= 10 and set(ticks) == {"tick"}
    await asyncio.wait_for(drain, 10)
    assert probe.seen.completed == 1


async def test_health_not_serving_until_warm(start_server: StartServer, open_channel: OpenChannel) -> None:
    server = await start_server([ProbeAgent().service()], serving=False)
    health = health_pb2_grpc.HealthStub(open_channel(server.address))
    assert (await health.Check(health_pb2.HealthCheckRequest())).status == health_pb2.HealthCheckResponse.NOT_SERVING
    live = await health.Check(health_pb2.HealthCheckRequest(service="liveness"))
    assert live.status == health_pb2.HealthCheckResponse.SERVING  # alive while not ready
    await server.set_serving(True)
    assert (await health.Check(health_pb2.HealthCheckRequest())).status == health_pb2.HealthCheckResponse.SERVING


async def test_unknown_method_is_unimplemented(start_server: StartServer, open_channel: OpenChannel) -> None:
    server = await start_server([ProbeAgent().service()])
    channel = open_channel(server.address)
    nope: Any = channel.unary_unary("/agentmesh.agent.v1.AgentService/Nope")
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await nope(b"")
    assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED


async def test_oversized_request_is_resource_exhausted(start_server: StartServer, open_channel: OpenChannel) -> None:
    config = replace(ServiceConfig(), max_message_bytes=64 * 1024)
    probe = ProbeAgent()
    server = await start_server([probe.service()], config=config)
    stub = agent_pb2_grpc.AgentServiceStub(open_channel(server.address, compression=grpc.Compression.NoCompression))
    call = stub.Complete(agent_pb2.CompleteRequest(prompt="echo:" + "y" * (200 * 1024)))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await collect(call)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert not probe.seen.started.is_set()


async def test_oversized_response_is_resource_exhausted(start_server: StartServer, open_channel: OpenChannel) -> None:
    server = await start_server([ProbeAgent().service()])
    stub = agent_pb2_grpc.AgentServiceStub(open_channel(server.address, max_message_bytes=64 * 1024))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        # The limit applies to the decompressed message, so gzip does not help.
        await collect(stub.Complete(agent_pb2.CompleteRequest(prompt="big:200000")))
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_exception_maps_to_internal_without_leaking(start_server: StartServer, open_channel: OpenChannel) -> None:
    server = await start_server([ProbeAgent().service()])
    stub = agent_pb2_grpc.AgentServiceStub(open_channel(server.address))
    call = stub.Complete(agent_pb2.CompleteRequest(prompt="fail:internal"), metadata=(("x-request-id", "req-42"),))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await collect(call)
    assert err.value.code() == grpc.StatusCode.INTERNAL
    text = f"{err.value.details()} {err.value.debug_error_string()} {err.value.trailing_metadata()}"
    assert "secret-internal-detail" not in text
    assert "Traceback" not in text and "RuntimeError" not in text
    rich = rich_error_of(err.value)
    assert rich.message == "internal error (request id req-42)"
    assert rich.request_id == "req-42"


async def test_domain_errors_map_to_status_with_rich_details(
    start_server: StartServer, open_channel: OpenChannel
) -> None:
    server = await start_server([ProbeAgent().service()])
    stub = agent_pb2_grpc.AgentServiceStub(open_channel(server.address))

    with pytest.raises(grpc.aio.AioRpcError) as err:
        await collect(stub.Complete(agent_pb2.CompleteRequest(prompt="fail:invalid")))
    rich = rich_error_of(err.value)
    assert rich.code == grpc.StatusCode.INVALID_ARGUMENT
    assert [(v.field, v.description) for v in rich.field_violations] == [("prompt", "must not say fail:invalid")]
    assert rich.reason == "INVALID_ARGUMENT" and rich.request_id

    with pytest.raises(grpc.aio.AioRpcError) as err:
        await collect(stub.Complete(agent_pb2.CompleteRequest(prompt="fail:exhausted")))
    rich = rich_error_of(err.value)
    assert rich.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert rich.retry_after_s == pytest.approx(2.5)
    assert dict(err.value.trailing_metadata())["grpc-retry-pushback-ms"] == "2500"


async def test_request_id_is_echoed_or_minted(start_server: StartServer, open_channel: OpenChannel) -> None:
    probe = ProbeAgent()
    server = await start_server([probe.service()])
    stub = agent_pb2_grpc.AgentServiceStub(open_channel(server.address))
    call = stub.Complete(agent_pb2.CompleteRequest(prompt="echo:hi"), metadata=(("x-request-id", "abc-123"),))
    await collect(call)
    assert dict(await call.trailing_metadata())["x-request-id"] == "abc-123"
    call = stub.Complete(agent_pb2.CompleteRequest(prompt="echo:hi"))
    await collect(call)
    minted = dict(await call.trailing_metadata())["x-request-id"]
    assert len(minted) == 32 and probe.seen.request_ids == ["abc-123", minted]


async def test_metrics_count_rpcs_by_code(start_server: StartServer, open_channel: OpenChannel) -> None:
    metrics = Metrics()
    server = await start_server([ProbeAgent().service()], metrics=metrics)
    stub = agent_pb2_grpc.AgentServiceStub(open_channel(server.address))
    await collect(stub.Complete(agent_pb2.CompleteRequest(prompt="echo:a b")))
    with pytest.raises(grpc.aio.AioRpcError):
        await collect(stub.Complete(agent_pb2.CompleteRequest(prompt="fail:invalid")))

    def value(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, labels)

    base = {"grpc_service": SERVICE_NAME, "grpc_method": "Complete", "grpc_type": "unary_stream"}
    assert value("agentmesh_rpc_server_started_total", **base) == 2
    assert value("agentmesh_rpc_server_handled_total", **base, grpc_code="OK") == 1
    assert value("agentmesh_rpc_server_handled_total", **base, grpc_code="INVALID_ARGUMENT") == 1
    assert value("agentmesh_rpc_server_handling_seconds_count", **base) == 2
    assert value("agentmesh_rpc_server_in_flight", grpc_service=SERVICE_NAME, grpc_method="Complete") == 0


async def test_max_concurrent_rpcs_rejects_excess(start_server: StartServer, open_channel: OpenChannel) -> None:
    config = replace(ServiceConfig(), max_concurrent_rpcs=1)
    probe = ProbeAgent()
    server = await start_server([probe.service()], config=config)
    stub = agent_pb2_grpc.AgentServiceStub(open_channel(server.address))
    first = stub.Complete(agent_pb2.CompleteRequest(prompt="hang"))
    await asyncio.wait_for(probe.seen.started.wait(), 5)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await collect(stub.Complete(agent_pb2.CompleteRequest(prompt="echo:second")))
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    first.cancel()


async def test_idempotent_unary_calls_are_retried_on_unavailable(
    start_server: StartServer, open_channel: OpenChannel
) -> None:
    probe = ProbeAgent()
    server = await start_server([probe.service()])
    probe.list_tools_failures = 2
    stub = agent_pb2_grpc.AgentServiceStub(open_channel(server.address))
    await stub.ListTools(agent_pb2.ListToolsRequest(), timeout=10)
    assert probe.list_tools_calls == 3

    # Control: a channel without the retry policy surfaces the first failure.
    probe.list_tools_failures, probe.list_tools_calls = 1, 0
    async with grpc.aio.insecure_channel(server.address) as plain:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await agent_pb2_grpc.AgentServiceStub(plain).ListTools(agent_pb2.ListToolsRequest())
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE and probe.list_tools_calls == 1
