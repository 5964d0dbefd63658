"""An in-process mesh on loopback: simulator replicas, a tool executor, routers and gateways (tests, benchmarks)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import grpc.aio
import redis.asyncio as aioredis
from opentelemetry.sdk.trace import TracerProvider

from agentmesh.agent.v1 import agent_pb2_grpc
from gateway.build import Gateway, build_gateway, load_keys
from gateway.config import GatewayConfig
from services.inference.servicer import InferenceServicer
from services.inference.session import SessionSettings
from services.inference.simulator import SimulatorEngine, SimulatorSettings
from services.router.build import Router, build_router, router_interceptors
from services.router.config import RouterConfig
from services.router.planning.embedding import Embedder
from services.router.replicas.picker import Picker
from services.runtime.cache import TwoLevelCache
from services.runtime.config import ServiceConfig
from services.runtime.metrics import Metrics
from services.runtime.server import MeshServer
from services.runtime.tenancy import stamp_tenant
from services.tools.builtin import default_tools
from services.tools.executor import ToolExecutor
from services.tools.registry import ToolDefinition, ToolRegistry
from services.tools.servicer import ToolExecutorServicer

FAST_SIM = SimulatorSettings(
    prefill_s_per_token=0.00002, decode_base_s=0.002, decode_per_seq_s=0.0, output_tokens=24, time_scale=1.0
)


@dataclass
class SimReplica:
    engine: SimulatorEngine
    server: MeshServer

    @property
    def address(self) -> str:
        return self.server.address


@dataclass
class Mesh:
    replicas: list[SimReplica]
    tools_server: MeshServer
    redis: aioredis.Redis
    servers: list[MeshServer] = field(default_factory=list)
    routers: list[tuple[Router, MeshServer, grpc.aio.Channel]] = field(default_factory=list)
    gateways: list[tuple[Gateway, MeshServer, grpc.aio.Channel]] = field(default_factory=list)
    tracer_provider: TracerProvider | None = None

    def submitted(self) -> list[int]:
        return [r.engine.submitted for r in self.replicas]

    def unfinished(self) -> int:
        return sum(r.engine.unfinished_requests() for r in self.replicas)

    def hit_rate(self) -> float:
        queried = sum(r.engine._queried_tokens for r in self.replicas)
        hits = sum(r.engine._hit_tokens for r in self.replicas)
        return hits / queried if queried else 0.0

    async def add_router(
        self,
        *,
        picker: Picker | None = None,
        tracer_provider: TracerProvider | None = None,
        embedder: Embedder | None = None,
        **overrides: Any,
    ) -> agent_pb2_grpc.AgentServiceAsyncStub:
        """A stub for a new router; ``tools=ADDRESS`` points it at another tool executor than the mesh's."""
        config = replace(
            RouterConfig(),
            port=0,
            inference=tuple(r.address for r in self.replicas),
            **{"tools": self.tools_server.address, **overrides},
        )
        metrics = Metrics()  # one registry for the server's RPC metrics and the router's own, as in production
        router = build_router(
            config, self.redis, metrics, tracer_provider or self.tracer_provider, picker=picker, embedder=embedder
        )
        server = MeshServer(
            config,
            router.services(),
            metrics=metrics,
            tracer_provider=tracer_provider or self.tracer_provider,
            interceptors=router_interceptors(),
        )
        await server.start()
        await router.start()
        assert await router.replicas.wait_any(10)
        for link in router.replicas.replicas:
            await link.wait_connected(10)
        # Called directly, the router sees the tenant the gateway would send ("acme" unless a call names one).
        channel = grpc.aio.insecure_channel(server.address, interceptors=stamp_tenant("acme"))
        self.routers.append((router, server, channel))
        return agent_pb2_grpc.AgentServiceStub(channel)

    async def add_gateway(
        self,
        *,
        keys: str = "acme:acme-secret-key,other:other-secret-key",
        tracer_provider: TracerProvider | None = None,
        metrics: Metrics | None = None,
        **overrides: Any,
    ) -> tuple[agent_pb2_grpc.AgentServiceAsyncStub, Gateway, MeshServer]:
        """A gateway in front of every router added so far: (stub, parts, server)."""
        routers = tuple(server.address for _, server, _ in self.routers)
        config = replace(GatewayConfig(), port=0, routers=routers, api_keys=keys, **overrides)
        metrics = metrics or Metrics()
        gateway = build_gateway(config, load_keys(config), self.redis, metrics, tracer_provider)
        server = MeshServer(
            config,
            [gateway.servicer.service()],
            metrics=metrics,
            tracer_provider=tracer_provider,
            interceptors=[gateway.auth],
        )
        await server.start()
        gateway.routers.start()
        assert await gateway.routers.wait_healthy(10)
        channel = grpc.aio.insecure_channel(server.address)
        self.gateways.append((gateway, server, channel))
        return agent_pb2_grpc.AgentServiceStub(channel), gateway, server

    async def close(self) -> None:
        for gateway, server, channel in self.gateways:
            await channel.close()
            await server.drain(grace=0)
            await gateway.routers.close()
        for router, server, channel in self.routers:
            await channel.close()
            await server.drain(grace=0)
            await router.close()
        for r in self.replicas:
            await r.server.drain(grace=0)
            await r.engine.close()
        await self.tools_server.drain(grace=0)


async def start_mesh(
    redis: aioredis.Redis,
    replicas: int = 4,
    sim: SimulatorSettings = FAST_SIM,
    extra_tools: Sequence[ToolDefinition] = (),
    tracer_provider: TracerProvider | None = None,
) -> Mesh:
    sims = []
    for i in range(replicas):
        engine = SimulatorEngine(replace(sim, model_id=f"sim-{i}"))
        await engine.start()
        tracer = tracer_provider.get_tracer("agentmesh.inference") if tracer_provider else None
        settings = SessionSettings(replica_id=f"sim-{i}", default_max_tokens=64, load_interval_s=0.05)
        servicer = InferenceServicer(engine, settings, tracer=tracer)
        server = MeshServer(
            ServiceConfig(port=0), [servicer.service()], metrics=Metrics(), tracer_provider=tracer_provider
        )
        await server.start()
        sims.append(SimReplica(engine, server))
    executor = ToolExecutor(ToolRegistry([*default_tools(), *extra_tools]), cache=TwoLevelCache("test:tools:", redis))
    tools_tracer = tracer_provider.get_tracer("agentmesh.tools") if tracer_provider else None
    tools_servicer = ToolExecutorServicer(executor, tools_tracer)
    tools_server = MeshServer(
        ServiceConfig(port=0), [tools_servicer.service()], metrics=Metrics(), tracer_provider=tracer_provider
    )
    await tools_server.start()
    return Mesh(sims, tools_server, redis, tracer_provider=tracer_provider)
