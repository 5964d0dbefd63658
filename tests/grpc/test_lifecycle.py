"""The one service lifecycle in-process: warm-up against SIGTERM, health after warm-up, closing in reverse."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.sdk.trace import TracerProvider

from services.runtime.config import ServiceConfig
from services.runtime.health import wait_serving
from services.runtime.lifecycle import Build, Kit, Parts, serve
from services.runtime.server import MeshServer, StartupError
from tests.support.probe_agent import ProbeAgent

CONFIG = ServiceConfig(port=0, drain_grace_s=1.0)


@pytest.fixture
async def signal_handlers_removed() -> AsyncIterator[None]:
    """``serve`` puts SIGTERM/SIGINT handlers on the test's loop; a start-up that fails leaves them there."""
    yield
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.remove_signal_handler(sig)


def recorder(events: list[str]) -> Callable[[str], Callable[[], Awaitable[None]]]:
    def closer(name: str) -> Callable[[], Awaitable[None]]:
        async def close() -> None:
            events.append(name)

        return close

    return closer


async def health_of(server: MeshServer) -> health_pb2.HealthCheckResponse.ServingStatus.ValueType:
    async with grpc.aio.insecure_channel(server.address) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        return reply.status


def start(build: Build[ServiceConfig]) -> asyncio.Task[None]:
    return asyncio.create_task(serve(CONFIG, build, tracer_provider=TracerProvider()))


@pytest.mark.usefixtures("signal_handlers_removed")
async def test_sigterm_during_warm_up_drains_cancels_the_warm_up_and_closes_in_reverse() -> None:
    events: list[str] = []
    closer = recorder(events)
    listening: asyncio.Future[MeshServer] = asyncio.get_running_loop().create_future()

    async def warm_up(server: MeshServer) -> None:
        listening.set_result(server)
        try:
            await asyncio.Event().wait()  # an engine that would load for ever
        except asyncio.CancelledError:
            events.append("warm-up cancelled")
            raise

    async def build(config: ServiceConfig, kit: Kit) -> Parts:
        kit.close_after_drain(closer("opened first"))
        kit.close_after_drain(closer("opened second"))
        kit.drain_with_server(closer("closed with the drain"))
        return Parts([ProbeAgent().service()], warm_up=warm_up)

    serving = start(build)
    server = await asyncio.wait_for(listening, 10)
    assert await health_of(server) == health_pb2.HealthCheckResponse.NOT_SERVING
    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.wait_for(serving, 10)
    assert server.draining
    assert events == ["closed with the drain", "warm-up cancelled", "opened second", "opened first"]


@pytest.mark.usefixtures("signal_handlers_removed")
async def test_health_follows_ready_once_warm_and_the_watch_runs_until_drain() -> None:
    up = asyncio.Event()
    watching = asyncio.Event()
    watch_cancelled = asyncio.Event()
    listening: asyncio.Future[MeshServer] = asyncio.get_running_loop().create_future()

    async def warm_up(server: MeshServer) -> None:
        listening.set_result(server)

    async def watch(_: MeshServer) -> None:
        watching.set()
        try:
            await asyncio.Event().wait()
        finally:
            watch_cancelled.set()

    async def build(config: ServiceConfig, kit: Kit) -> Parts:
        return Parts([ProbeAgent().service()], warm_up=warm_up, ready=up.is_set, watch=watch)

    serving = start(build)
    server = await asyncio.wait_for(listening, 10)
    await asyncio.wait_for(watching.wait(), 10)
    assert await health_of(server) == health_pb2.HealthCheckResponse.NOT_SERVING
    up.set()
    await wait_serving(server.address, within_s=10)
    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.wait_for(serving, 10)
    assert watch_cancelled.is_set()


@pytest.mark.usefixtures("signal_handlers_removed")
async def test_a_failed_warm_up_stops_the_server_and_closes_what_was_opened() -> None:
    events: list[str] = []
    servers: list[MeshServer] = []

    async def warm_up(server: MeshServer) -> None:
        servers.append(server)
        raise StartupError("--http-port 1: permission denied")

    async def build(config: ServiceConfig, kit: Kit) -> Parts:
        kit.close_after_drain(recorder(events)("redis"))
        return Parts([ProbeAgent().service()], warm_up=warm_up)

    with pytest.raises(StartupError, match="--http-port 1"):
        await asyncio.wait_for(start(build), 10)
    assert events == ["redis"]
    assert servers[0].draining
