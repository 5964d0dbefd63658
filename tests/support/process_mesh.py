"""The whole mesh as processes on loopback: Redis, simulator replicas, tools, routers and a gateway.

The same entry points ``agentmesh up`` runs (``python -m services.inference``
and so on), wired by address: every router sees every replica and the tool
executor; the gateway sees every router. Replicas run the simulator engine, so
a dozen process starts cost seconds, not minutes. The response cache is off,
so every turn reaches a replica (a cached replay would hide a failure).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import grpc.aio

from agentmesh.agent.v1 import agent_pb2_grpc
from meshkit.up import free_port
from tests.support.processes import RedisProcess, ServiceProcess, clean_env

API_KEY = "reliability-key"
AUTH = (("authorization", f"Bearer {API_KEY}"),)


@dataclass(frozen=True)
class MeshShape:
    """How many of each service, and how the simulators behave (tokens per answer, seconds per step)."""

    replicas: int = 2
    routers: int = 1
    sim_output_tokens: int = 400
    sim_decode_base_s: float = 0.01
    sim_max_batch: int = 32
    router_args: tuple[str, ...] = ()
    #: Budgets and admission far above what the suite asks: the cases test failures, not rate limits or
    #: shedding (a slow shared box would otherwise shed turns and blur what a case observed).
    gateway_args: tuple[str, ...] = (
        "--rate-rps",
        "100000",
        "--rate-burst",
        "100000",
        "--rate-window-max",
        "10000000",
        "--rate-tokens-per-min",
        "1e12",
        "--rate-token-burst",
        "1e12",
        "--concurrency-min",
        "64",
        "--concurrency-initial",
        "64",
        "--ttft-target-s",
        "60",
        "--slo-p1-s",
        "30",
    )
    #: Longer than a turn of the suite takes; a replica waits it out (routers hold its Generate streams).
    drain_grace_s: float = 8.0
    #: The gateway's OpenAI HTTP edge on a port of its own (off by default: see ``ProcessMesh``).
    http_edge: bool = False


@dataclass
class ProcessMesh:
    folder: Path
    shape: MeshShape = field(default_factory=MeshShape)
    redis: RedisProcess = field(init=False)
    replicas: list[ServiceProcess] = field(default_factory=list)
    tools: ServiceProcess = field(init=False)
    routers: list[ServiceProcess] = field(default_factory=list)
    gateway: ServiceProcess = field(init=False)
    #: The HTTP edge's port when ``MeshShape.http_edge``, else 0.
    http_port: int = 0

    def __post_init__(self) -> None:
        s = self.shape
        # The OpenAI HTTP edge is off: its fixed default port would collide between meshes.
        env = clean_env({"AGENTMESH_GATEWAY_API_KEYS": f"acme:{API_KEY}", "AGENTMESH_GATEWAY_HTTP_PORT": "-1"})
        self.redis = RedisProcess(self.folder)
        common = ["--drain-grace-s", str(s.drain_grace_s), "--log-level", "warning"]

        def service(name: str, module: str, *args: str) -> ServiceProcess:
            return ServiceProcess(name, module, [*common, *args], self.folder, env)

        sim = [
            "--engine",
            "simulator",
            "--sim-output-tokens",
            str(s.sim_output_tokens),
            "--sim-decode-base-s",
            str(s.sim_decode_base_s),
            "--sim-decode-per-seq-s",
            "0",
            "--sim-max-batch",
            str(s.sim_max_batch),
            "--default-max-tokens",
            "256",
        ]
        self.replicas = [
            service(f"sim-{i}", "services.inference", *sim, "--replica-id", f"sim-{i}") for i in range(s.replicas)
        ]
        redis = ["--redis-url", self.redis.url]
        self.tools = service("tools", "services.tools", *redis)
        inference = ",".join(r.address for r in self.replicas)
        self.routers = [
            service(
                f"router-{i}",
                "services.router",
                *redis,
                "--inference",
                inference,
                "--tools",
                self.tools.address,
                "--response-cache-ttl-s",
                "0",
                "--tool-selection",
                "llm",
                *s.router_args,
            )
            for i in range(s.routers)
        ]
        http = []
        if s.http_edge:
            self.http_port = free_port()
            http = ["--http-port", str(self.http_port)]
        self.gateway = service(
            "gateway", "gateway", *redis, "--routers", ",".join(r.address for r in self.routers), *http, *s.gateway_args
        )

    @property
    def services(self) -> list[ServiceProcess]:
        return [*self.replicas, self.tools, *self.routers, self.gateway]

    async def start(self) -> None:
        """Redis, then replicas and tools together, then routers, then the gateway (each SERVING)."""
        await self.redis.start()
        await asyncio.gather(*(p.start() for p in [*self.replicas, self.tools]))
        await asyncio.gather(*(r.start() for r in self.routers))
        await self.gateway.start()

    async def close(self) -> None:
        for proc in reversed(self.services):
            if proc.running:
                proc.kill()
                await proc.wait_exit()
        await self.redis.stop()

    def channel(self, target: str | None = None) -> grpc.aio.Channel:
        """A plain client channel (the gateway's address by default), as an outside client would open."""
        return grpc.aio.insecure_channel(target or self.gateway.address)

    @staticmethod
    def stub(channel: grpc.aio.Channel) -> agent_pb2_grpc.AgentServiceAsyncStub:
        return agent_pb2_grpc.AgentServiceStub(channel)

    async def unfinished(self) -> float:
        """Requests running or waiting on every live replica (from their metrics)."""
        total = 0.0
        for replica in self.replicas:
            if replica.running:
                total += await replica.metric("agentmesh_inference_running_requests")
                total += await replica.metric("agentmesh_inference_queue_depth")
        return total
