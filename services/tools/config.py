"""Configuration of the tool executor (flags and AGENTMESH_TOOLS_* variables).

``--mcp-config FILE`` (``AGENTMESH_TOOLS_MCP_CONFIG``) names the MCP servers to
mount; the file is read, its ``${env:NAME}`` references resolved and every
server checked here, once, so a mistake stops the executor before it listens
(``services/tools/mcp/config.py`` has the format).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from services.runtime.config import ConfigError, RedisConfig, non_negative, opt, port, positive
from services.tools.mcp.config import McpConfigError, McpServerConfig, load_mcp_config


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
    mcp_config: str = opt("", "MCP servers to mount: a JSON file in the mcpServers format (default none)")
    mcp_start_wait_s: float = opt(
        15.0, "seconds the start waits for MCP servers' first connection before SERVING", check=non_negative
    )
    #: The servers of ``mcp_config``, resolved and checked.
    mcp_servers: tuple[McpServerConfig, ...] = field(default=(), init=False, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mcp_config:
            try:
                servers = load_mcp_config(self.mcp_config)
            except McpConfigError as exc:
                raise ConfigError(f"--mcp-config: {exc}") from None
            object.__setattr__(self, "mcp_servers", servers)
