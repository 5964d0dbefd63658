"""The tool executor process: ``python -m services.tools`` or ``agentmesh-tools``."""

from __future__ import annotations

import sys

from services.runtime.cache import LruTtlCache, TwoLevelCache
from services.runtime.launch import run_service
from services.runtime.metrics import Metrics, MetricsServer
from services.runtime.redis import connect_redis
from services.runtime.server import MeshServer, stop_signals
from services.runtime.telemetry import tracing_for
from services.runtime.tls import MeshTls
from services.tools.builtin import default_tools
from services.tools.config import ToolsConfig
from services.tools.executor import BreakerPolicy, ToolExecutor
from services.tools.metrics import ToolMetrics
from services.tools.registry import ToolRegistry
from services.tools.servicer import ToolExecutorServicer

CACHE_NAMESPACE = "agentmesh:tools:"


async def serve(config: ToolsConfig) -> None:
    stop = stop_signals()
    tracer_provider = tracing_for(config)
    redis = await connect_redis(config.redis_url, required=config.redis_required)
    metrics = Metrics()
    # Validators are compiled here, once, as each tool is registered.
    registry = ToolRegistry(default_tools(http_allowlist=config.http_allowlist))
    executor = ToolExecutor(
        registry,
        cache=TwoLevelCache(CACHE_NAMESPACE, redis, LruTtlCache(config.l1_cache_entries)),
        metrics=ToolMetrics(metrics),
        max_argument_bytes=config.max_argument_bytes,
        breaker=BreakerPolicy(config.breaker_failures, config.breaker_reset_s),
    )
    server = MeshServer(
        config,
        [ToolExecutorServicer(executor, tracer_provider.get_tracer("agentmesh.tools")).service()],
        metrics=metrics,
        tracer_provider=tracer_provider,
        tls=MeshTls.from_config(config),
    )
    metrics_server = MetricsServer(metrics, config.host, config.metrics_port) if config.metrics_port >= 0 else None
    await server.start()
    await stop
    await server.drain()
    if metrics_server is not None:
        metrics_server.close()
    if redis is not None:
        await redis.aclose()


def main() -> int:
    return run_service(ToolsConfig, serve)


if __name__ == "__main__":
    sys.exit(main())
