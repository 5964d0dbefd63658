"""Configuration of the tool executor (flags and AGENTMESH_TOOLS_* variables)."""

from __future__ import annotations

from dataclasses import dataclass

from services.runtime.config import RedisConfig, opt, port, positive


@dataclass(frozen=True)
class ToolsConfig(RedisConfig):
    """AgentMesh tool executor: runs agent tools with timeouts, retries, breakers and a cache."""

    ENV_PREFIX = "AGENTMESH_TOOLS_"
    SERVICE_NAME = "tools"

    port: int = opt(50053, "gRPC port", check=port)
    metrics_port: int = opt(9153, "Prometheus /metrics port (0 picks a free one, -1 disables)")
    http_allowlist: tuple[str, ...] = opt((), "hosts, IPs or CIDRs http_get may fetch (comma-separated; default none)")
    max_argument_bytes: int = opt(64 * 1024, "largest arguments_json accepted", check=positive)
    l1_cache_entries: int = opt(4096, "in-process result-cache entries", check=positive)
    breaker_failures: int = opt(5, "consecutive failures that open a tool's circuit breaker", check=positive)
    breaker_reset_s: float = opt(10.0, "seconds an open breaker waits before a half-open probe", check=positive)
