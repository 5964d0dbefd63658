"""Configuration of the gateway (flags and AGENTMESH_GATEWAY_* variables)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from services.runtime.config import ConfigError, RedisConfig, opt, port, port_or_off, positive

#: Most client-defined tools one Chat Completions request may offer (OpenAI's own limit is 128).
HTTP_MAX_TOOLS = 128


@dataclass(frozen=True)
class GatewayConfig(RedisConfig):
    """AgentMesh gateway: auth, rate limits, priority admission, forwarding to routers."""

    ENV_PREFIX = "AGENTMESH_GATEWAY_"
    SERVICE_NAME = "gateway"

    port: int = opt(50051, "gRPC port", check=port)
    metrics_port: int = opt(9151, "Prometheus /metrics port (0 picks a free one, -1 disables)")
    routers: tuple[str, ...] = opt(("127.0.0.1:50052",), "router replicas (host:port, comma-separated)")
    api_keys_file: str = opt("", "file of 'tenant key' or 'tenant sha256:<hex>' lines")
    api_keys: str = opt("", "tenant:key pairs, comma-separated (prefer the file or the environment)")
    rate_limit_backend: str = opt(
        "redis", "where budgets live: redis (shared) or memory (this replica only)", choices=("redis", "memory")
    )
    rate_rps: float = opt(10.0, "requests per second per tenant (token bucket refill)", check=positive)
    rate_burst: float = opt(20.0, "request bucket size per tenant", check=positive)
    rate_tokens_per_min: float = opt(60_000.0, "prompt+completion tokens per minute per tenant", check=positive)
    rate_token_burst: float = opt(20_000.0, "token bucket size per tenant", check=positive)
    rate_window_s: float = opt(60.0, "sliding window length", check=positive)
    rate_window_max: int = opt(600, "requests allowed per sliding window per tenant", check=positive)
    slo_p0_s: float = opt(0.5, "queue-wait SLO of P0 requests", check=positive)
    slo_p1_s: float = opt(2.0, "queue-wait SLO of P1 requests", check=positive)
    slo_p2_s: float = opt(5.0, "queue-wait SLO of P2 requests", check=positive)
    concurrency_initial: float = opt(16.0, "initial admitted-request limit", check=positive)
    concurrency_min: float = opt(2.0, "lowest admitted-request limit", check=positive)
    concurrency_max: float = opt(256.0, "highest admitted-request limit", check=positive)
    ttft_target_s: float = opt(3.0, "time-to-first-token target that the limit adapts to", check=positive)
    http_port: int = opt(8080, "OpenAI-compatible HTTP port (0 picks a free one, -1 disables)", check=port_or_off)
    http_timeout_s: float = opt(600.0, "longest HTTP request (HTTP callers send no deadline)", check=positive)
    http_completion_model: str = opt("SmolLM2-135M-Instruct", "plain-completion model name that /v1/models lists")
    http_max_tools: int = opt(HTTP_MAX_TOOLS, "most client-defined tools one HTTP request may offer", check=positive)
    http_responses_ttl_s: float = opt(
        86_400.0, "seconds a stored /v1/responses response lives (the router's --session-ttl-s)", check=positive
    )

    def validate(self) -> None:
        if not self.routers:
            raise ConfigError("--routers: at least one router is required")
        if self.api_keys_file and not Path(self.api_keys_file).is_file():
            raise ConfigError(f"--api-keys-file: {self.api_keys_file} does not exist")
        if not self.api_keys_file and not self.api_keys and not os.environ.get("AGENTMESH_GATEWAY_API_KEYS"):
            raise ConfigError("no API keys: set --api-keys-file or AGENTMESH_GATEWAY_API_KEYS=tenant:key")
        if not self.concurrency_min <= self.concurrency_initial <= self.concurrency_max:
            raise ConfigError("--concurrency-initial must lie between --concurrency-min and --concurrency-max")
