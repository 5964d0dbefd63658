"""The router's parts from its config: replica set, tools link and lists, sessions, generator, agent loop, servicer.

``build_router`` is shared by ``service_parts`` (the process), the in-process test mesh and the evals.
Health is SERVING while at least one inference replica is connected and
NOT_SERVING otherwise (``MeshServer.follow`` tracks the links), so a gateway or
a Kubernetes probe never sends turns to a router that cannot answer them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import grpc.aio
import redis.asyncio as aioredis
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from services.router.config import RouterConfig
from services.router.metrics import RouterMetrics
from services.router.planning import Planner
from services.router.planning.embedding import Embedder, MiniLmEmbedder
from services.router.replicas.addresses import ReplicaSet
from services.router.replicas.generation import Generator
from services.router.replicas.picker import Picker, make_picker
from services.router.serving.relay import SERVICE_NAME as RELAY_SERVICE
from services.router.serving.relay import RelayServicer
from services.router.serving.servicer import AgentServicer
from services.router.sessions.store import SessionStore
from services.router.tools.link import ToolsLink
from services.router.tools.lists import ToolLists
from services.router.tools.planners import MemoEmbedder, Planners
from services.router.turn.agent_loop import AgentLoop, LoopSettings
from services.runtime.cache import TwoLevelCache
from services.runtime.channel import create_channel
from services.runtime.interceptors.base import RpcInterceptor
from services.runtime.lifecycle import Kit, Parts
from services.runtime.metrics import Metrics
from services.runtime.redis import connect_redis
from services.runtime.server import Service, StartupError
from services.runtime.tenancy import OPEN_PREFIXES, TenantInterceptor
from services.runtime.tls import MeshTls


@dataclass
class Router:
    """The router's parts, wired; shared by ``serve`` and the tests."""

    servicer: AgentServicer
    replicas: ReplicaSet
    tools: ToolsLink
    generator: Generator
    loop: AgentLoop
    metrics: RouterMetrics
    relay: RelayServicer
    lists: ToolLists
    embedder: Embedder | None = None

    def services(self) -> list[Service]:
        """What the router serves: the AgentService, and the gateways' Relay streams for Complete."""
        return [self.servicer.service(), self.relay.service()]

    async def announce_draining(self) -> None:
        await asyncio.gather(self.servicer.announce_draining(), self.relay.announce_draining())

    async def start(self) -> None:
        await self.replicas.start()
        self.tools.start()
        await self.loop.warm_up()

    async def close(self) -> None:
        await self.lists.close()
        await self.replicas.close()
        await self.tools.close()


def build_router(
    config: RouterConfig,
    redis: aioredis.Redis,
    metrics: Metrics,
    tracer_provider: TracerProvider | None = None,
    picker: Picker | None = None,
    *,
    embedder: Embedder | None = None,
) -> Router:
    """Wire a router; ``embedder`` lets several routers in one process share one embedding model."""
    router_metrics = RouterMetrics(metrics)
    tls = MeshTls.from_config(config)

    def channel(target: str) -> grpc.aio.Channel:
        # No tracing interceptors: these channels carry long-lived multiplexed streams (a CLIENT span per stream
        # says nothing; each submit and tool call carries its own trace context), and an intercepted stream
        # sends every write through a queue and a task of its own (BENCHMARKS.md, relay).
        return create_channel(target, max_message_bytes=config.max_message_bytes, tls=tls)

    replicas = ReplicaSet(config.inference, channel, refresh_s=config.dns_refresh_s)
    tools = ToolsLink(config.tools, channel, refresh_s=config.dns_refresh_s)
    sessions = SessionStore(redis, ttl_s=config.session_ttl_s)
    cache = TwoLevelCache("agentmesh:response:", redis) if config.response_cache_ttl_s > 0 else None
    generator = Generator(
        replicas,
        picker or make_picker(config.picker, config.load_factor),
        cache=cache,
        metrics=router_metrics,
        model_id=config.model_id,
        cache_ttl_s=config.response_cache_ttl_s,
        flush_s=config.stream_flush_ms / 1000,
        share_prefix_cache=config.share_prefix_cache,
    )
    tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer("agentmesh.router")
    planning = config.planning()
    if planning.embeds:
        embedder = embedder or MiniLmEmbedder()
    # Card texts embedded once for every tool list's planner (tools/planners.py).
    cards_embedder = MemoEmbedder(embedder) if planning.embeds and embedder is not None else None

    def new_planner() -> Planner:
        return Planner(generator, planning, cards_embedder, metrics=router_metrics, tracer=tracer)

    lists = ToolLists(tools, poll_s=config.tools_poll_s)
    loop = AgentLoop(
        generator,
        tools,
        sessions,
        Planners(new_planner(), new_planner),
        lists=lists,
        settings=LoopSettings(
            default_max_tool_rounds=config.max_tool_rounds,
            history_budget_tokens=config.history_budget_tokens,
            history_keep=config.history_keep,
            answer_max_tokens=config.answer_max_tokens,
            answer_repetition_penalty=config.answer_repetition_penalty,
            tool_timeout_s=config.tool_timeout_s,
            client_tool_wait_s=config.client_tool_wait_s,
            answer_opening=config.answer_opening,
        ),
        metrics=router_metrics,
        tracer=tracer,
    )
    servicer = AgentServicer(
        loop,
        generator,
        sessions,
        max_output_tokens=config.max_output_tokens,
        repetition_penalty=config.answer_repetition_penalty,
        max_client_tools=config.max_client_tools,
    )
    relay = RelayServicer(servicer.complete_events, metrics=metrics, tracer_provider=tracer_provider)
    return Router(servicer, replicas, tools, generator, loop, router_metrics, relay, lists, embedder)


def router_interceptors() -> list[RpcInterceptor]:
    """The router's own server interceptors: a tenant on every call, except Relay's (per request, in band)."""
    return [TenantInterceptor((*OPEN_PREFIXES, f"/{RELAY_SERVICE}/"))]


async def service_parts(config: RouterConfig, kit: Kit) -> Parts:
    """The router for ``lifecycle.serve``: sessions in Redis; SERVING while an inference replica is reachable."""
    redis = await connect_redis(config.redis_url, required=True)
    if redis is None:  # pragma: no cover - required=True raises instead
        raise StartupError("the router needs Redis for sessions")
    kit.close_after_drain(redis.aclose)
    router = build_router(config, redis, kit.metrics, kit.tracer_provider)
    kit.close_after_drain(router.close)
    return Parts(
        router.services(),
        interceptors=router_interceptors(),
        tls=MeshTls.from_config(config),
        warm_up=lambda _: router.start(),
        ready=lambda: any(link.available for link in router.replicas.replicas),
        announce_draining=router.announce_draining,
    )
