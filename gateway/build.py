"""The gateway's parts from its config: rate limiter, admission, router pool, auth and the HTTP edge.

``build_gateway`` is shared by ``service_parts`` (the process) and the in-process test mesh.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import grpc.aio
import redis.asyncio as aioredis
from opentelemetry.sdk.trace import TracerProvider

from gateway.admission import AdmissionController, AdmissionMetrics
from gateway.auth import ApiKeys, AuthInterceptor, KeyFormatError
from gateway.config import GatewayConfig
from gateway.http_edge import HttpEdge
from gateway.ratelimit import Limits, MemoryRateLimiter, RateLimiter, RedisRateLimiter
from gateway.responses_store import MemoryResponseRecords, RedisResponseRecords, ResponseStore
from gateway.routers import RouterPool
from gateway.servicer import GatewayServicer
from services.runtime.channel import create_channel
from services.runtime.interceptors.tracing import INSTRUMENTATION
from services.runtime.lifecycle import Kit, Parts
from services.runtime.metrics import Metrics
from services.runtime.redis import connect_redis
from services.runtime.server import MeshServer, StartupError
from services.runtime.tls import MeshTls


@dataclass
class Gateway:
    servicer: GatewayServicer
    routers: RouterPool
    admission: AdmissionController
    auth: AuthInterceptor


def build_gateway(
    config: GatewayConfig,
    keys: ApiKeys,
    redis: aioredis.Redis | None,
    metrics: Metrics,
    tracer_provider: TracerProvider | None = None,
) -> Gateway:
    tls = MeshTls.from_config(config)  # the gateway's channels to routers; its public port stays as it is

    def channel(target: str) -> grpc.aio.Channel:
        # No tracing interceptors: the servicer makes each call's CLIENT span itself, without an intercepted
        # call object per call and one more async step per relayed message (BENCHMARKS.md, relay).
        return create_channel(target, max_message_bytes=config.max_message_bytes, tls=tls)

    limits = Limits(
        config.rate_rps,
        config.rate_burst,
        config.rate_tokens_per_min,
        config.rate_token_burst,
        config.rate_window_s,
        config.rate_window_max,
    )
    limiter: RateLimiter
    if config.rate_limit_backend == "memory":
        limiter = MemoryRateLimiter(limits)
    else:
        if redis is None:
            raise StartupError("rate limits need Redis (or --rate-limit-backend memory)")
        limiter = RedisRateLimiter(redis, limits)
    admission = AdmissionController(
        {0: config.slo_p0_s, 1: config.slo_p1_s, 2: config.slo_p2_s},
        initial_limit=config.concurrency_initial,
        min_limit=config.concurrency_min,
        max_limit=config.concurrency_max,
        ttft_target_s=config.ttft_target_s,
        metrics=AdmissionMetrics(metrics),
    )
    routers = RouterPool(config.routers, channel)
    tracer = tracer_provider.get_tracer(INSTRUMENTATION) if tracer_provider is not None else None
    servicer = GatewayServicer(routers, limiter, admission, tracer=tracer)
    return Gateway(servicer, routers, admission, AuthInterceptor(keys))


def load_keys(config: GatewayConfig) -> ApiKeys:
    env = ",".join(v for v in (config.api_keys, os.environ.get("AGENTMESH_GATEWAY_API_KEYS", "")) if v)
    try:
        return ApiKeys.load(Path(config.api_keys_file) if config.api_keys_file else None, env)
    except KeyFormatError as exc:
        raise StartupError(str(exc)) from None


async def start_http_edge(
    config: GatewayConfig, grpc_port: int, keys: ApiKeys | None = None, redis: aioredis.Redis | None = None
) -> HttpEdge | None:
    """The OpenAI-compatible edge on ``--http-port``, calling this gateway's gRPC port on loopback; with
    ``keys``, the Responses API too, its responses in ``redis`` (shared by every gateway) or, without, here."""
    if config.http_port < 0:
        return None
    loopback = "127.0.0.1" if config.host in ("0.0.0.0", "::", "") else config.host
    responses = None
    if keys is not None:
        records = RedisResponseRecords(redis) if redis is not None else MemoryResponseRecords()
        responses = ResponseStore(records, keys.tenant_for, config.http_responses_ttl_s)
    edge = HttpEdge(
        f"{loopback}:{grpc_port}",
        timeout_s=config.http_timeout_s,
        completion_model=config.http_completion_model,
        max_tools=config.http_max_tools,
        responses=responses,
    )
    try:
        await edge.start(config.host, config.http_port, grace_s=config.drain_grace_s)
    except OSError as exc:
        raise StartupError(f"--http-port {config.http_port}: {exc}") from None
    return edge


async def service_parts(config: GatewayConfig, kit: Kit) -> Parts:
    """The gateway for ``lifecycle.serve``: SERVING while a router is up; the HTTP edge drains with it."""
    keys = load_keys(config)
    redis = None
    if config.rate_limit_backend == "redis" or config.http_port >= 0:  # rate limits, stored responses
        redis = await connect_redis(config.redis_url, required=config.rate_limit_backend == "redis")
    if redis is not None:
        kit.close_after_drain(redis.aclose)
    gateway = build_gateway(
        config, keys, redis if config.rate_limit_backend == "redis" else None, kit.metrics, kit.tracer_provider
    )
    kit.close_after_drain(gateway.routers.close)

    async def warm_up(server: MeshServer) -> None:
        edge = await start_http_edge(config, server.port, keys, redis)
        if edge is not None:
            # The edge stops listening and its requests get the grace while the gRPC server they call drains.
            kit.drain_with_server(edge.close)
        gateway.routers.start()

    return Parts(
        [gateway.servicer.service()],
        interceptors=[gateway.auth],
        warm_up=warm_up,
        ready=gateway.routers.any_healthy,
        announce_draining=gateway.servicer.announce_draining,
    )
