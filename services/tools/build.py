"""The tool executor's parts from its config: the registry of built-in tools, the executor and its cache."""

from __future__ import annotations

from services.runtime.cache import LruTtlCache, TwoLevelCache
from services.runtime.lifecycle import Kit, Parts
from services.runtime.redis import connect_redis
from services.runtime.tls import MeshTls
from services.tools.builtin import default_tools
from services.tools.config import ToolsConfig
from services.tools.executor import BreakerPolicy, ToolExecutor
from services.tools.metrics import ToolMetrics
from services.tools.registry import ToolRegistry
from services.tools.servicer import ToolExecutorServicer

CACHE_NAMESPACE = "agentmesh:tools:"


async def service_parts(config: ToolsConfig, kit: Kit) -> Parts:
    """The tool executor for ``lifecycle.serve``: SERVING as soon as it listens (Redis is only a cache)."""
    redis = await connect_redis(config.redis_url, required=config.redis_required)
    if redis is not None:
        kit.close_after_drain(redis.aclose)
    # Validators are compiled here, once, as each tool is registered.
    registry = ToolRegistry(default_tools(http_allowlist=config.http_allowlist))
    executor = ToolExecutor(
        registry,
        cache=TwoLevelCache(CACHE_NAMESPACE, redis, LruTtlCache(config.l1_cache_entries)),
        metrics=ToolMetrics(kit.metrics),
        max_argument_bytes=config.max_argument_bytes,
        breaker=BreakerPolicy(config.breaker_failures, config.breaker_reset_s),
    )
    servicer = ToolExecutorServicer(executor, kit.tracer_provider.get_tracer("agentmesh.tools"))
    return Parts([servicer.service()], tls=MeshTls.from_config(config))
