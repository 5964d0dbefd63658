"""The tool executor's parts from its config: the registry of built-in tools, the MCP servers mounted beside
them, the executor and its cache.

The MCP servers' connections start before the server listens; warm-up waits
(at most ``--mcp-start-wait-s``) for each server's first attempt, so SERVING
comes with the tools of every server that came up, and one that did not is
restarting in the background. They are shut down after the drain.
"""

from __future__ import annotations

from services.runtime.cache import LruTtlCache, TwoLevelCache
from services.runtime.lifecycle import Kit, Parts
from services.runtime.redis import connect_redis
from services.runtime.server import MeshServer
from services.runtime.tls import MeshTls
from services.tools.builtin import default_tools
from services.tools.config import ToolsConfig
from services.tools.executor import BreakerPolicy, ToolExecutor
from services.tools.mcp.connection import quiet_sdk_logs
from services.tools.mcp.mount import McpMount
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
    metrics = ToolMetrics(kit.metrics)
    mount = McpMount(config.mcp_servers, registry, metrics)
    executor = ToolExecutor(
        registry,
        cache=TwoLevelCache(CACHE_NAMESPACE, redis, LruTtlCache(config.l1_cache_entries)),
        metrics=metrics,
        max_argument_bytes=config.max_argument_bytes,
        breaker=BreakerPolicy(config.breaker_failures, config.breaker_reset_s),
        unknown_tool=mount.unknown_tool,
    )
    servicer = ToolExecutorServicer(executor, kit.tracer_provider.get_tracer("agentmesh.tools"))
    if config.mcp_servers:
        quiet_sdk_logs(debug=config.log_level == "debug")
        mount.start()
        kit.close_after_drain(mount.close)

    async def warm_up(server: MeshServer) -> None:
        await mount.settled(config.mcp_start_wait_s)

    return Parts(
        [servicer.service()],
        tls=MeshTls.from_config(config),
        warm_up=warm_up if config.mcp_servers else None,
        announce_draining=servicer.announce_draining,
    )
