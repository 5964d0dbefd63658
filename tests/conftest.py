"""Shared fixtures: real grpc.aio servers on 127.0.0.1:0 built by the shared runtime, and real Redis."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import replace

import grpc.aio
import pytest
import redis.asyncio as aioredis
import uvloop
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from services.runtime.channel import create_channel
from services.runtime.config import ServiceConfig
from services.runtime.metrics import Metrics
from services.runtime.server import MeshServer, Service

REDIS_URL = os.environ.get("AGENTMESH_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")

StartServer = Callable[..., Awaitable[MeshServer]]


@pytest.fixture(scope="session")
def event_loop_policy() -> uvloop.EventLoopPolicy:
    """Tests run on uvloop, as the services do."""
    return uvloop.EventLoopPolicy()


@pytest.fixture
def span_exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer_provider(span_exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    return provider


@pytest.fixture
async def start_server() -> AsyncIterator[StartServer]:
    """Start MeshServers on 127.0.0.1:0 with the shared runtime; all are stopped at teardown."""
    servers: list[MeshServer] = []

    async def start(
        services: Sequence[Service],
        *,
        config: ServiceConfig | None = None,
        tracer_provider: TracerProvider | None = None,
        metrics: Metrics | None = None,
        serving: bool = True,
    ) -> MeshServer:
        cfg = config or ServiceConfig()
        cfg = replace(cfg, host="127.0.0.1", port=0)
        server = MeshServer(cfg, services, metrics=metrics or Metrics(), tracer_provider=tracer_provider)
        await server.start(serving=serving)
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.drain(grace=0)


@pytest.fixture
async def open_channel() -> AsyncIterator[Callable[..., grpc.aio.Channel]]:
    """Channels from the shared channel factory, closed at teardown."""
    channels: list[grpc.aio.Channel] = []

    def open_(target: str, **kwargs: object) -> grpc.aio.Channel:
        channel = create_channel(target, **kwargs)  # type: ignore[arg-type]
        channels.append(channel)
        return channel

    yield open_
    for channel in channels:
        await channel.close()


@pytest.fixture
async def redis_client() -> AsyncIterator[aioredis.Redis]:
    """A real Redis (database 15, flushed before and after). Fails, never skips, if Redis is down."""
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        await client.ping()
    except Exception as exc:  # pragma: no cover - environment problem
        pytest.fail(f"Redis at {REDIS_URL} is not reachable ({exc}); `make setup` starts one")
    await client.flushdb()
    yield client
    await client.flushdb()
    await client.aclose()
