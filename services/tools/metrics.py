"""Tool executor metrics: calls, latency, errors by reason, cache hit ratio, breaker state, in flight.

MCP tools are counted like every tool (by their namespaced name) and again by
server: calls by server, tool and status, latency by server, whether each
server is up, and its restarts.
"""

from __future__ import annotations

from collections import defaultdict

from prometheus_client import Counter, Gauge, Histogram

from services.runtime.metrics import LATENCY_BUCKETS, Metrics


class ToolMetrics:
    def __init__(self, metrics: Metrics) -> None:
        ns, reg = metrics.namespace, metrics.registry
        self.calls = Counter(
            "tool_calls", "Tool calls by final status.", ["tool", "status"], namespace=ns, registry=reg
        )
        self.latency = Histogram(
            "tool_call_seconds",
            "Tool call latency, retries included.",
            ["tool"],
            namespace=ns,
            registry=reg,
            buckets=LATENCY_BUCKETS,
        )
        self.errors = Counter("tool_errors", "Tool errors by reason.", ["tool", "reason"], namespace=ns, registry=reg)
        self.retries = Counter("tool_retries", "Retried attempts.", ["tool"], namespace=ns, registry=reg)
        self.cache_lookups = Counter(
            "tool_cache_lookups",
            "Result-cache lookups by level hit (l1, l2) or miss.",
            ["tool", "result"],
            namespace=ns,
            registry=reg,
        )
        self.cache_hit_ratio = Gauge(
            "tool_cache_hit_ratio",
            "Share of cache lookups that hit, since start.",
            ["tool"],
            namespace=ns,
            registry=reg,
        )
        self.breaker_state = Gauge(
            "tool_circuit_breaker_state",
            "0 closed, 1 half-open, 2 open.",
            ["tool"],
            namespace=ns,
            registry=reg,
        )
        self.in_flight = Gauge("tool_calls_in_flight", "Calls running now.", ["tool"], namespace=ns, registry=reg)
        self.mcp_calls = Counter(
            "mcp_tool_calls",
            "MCP tool calls by server, tool and final status.",
            ["server", "tool", "status"],
            namespace=ns,
            registry=reg,
        )
        self.mcp_latency = Histogram(
            "mcp_tool_call_seconds",
            "MCP tool call latency by server, retries included.",
            ["server"],
            namespace=ns,
            registry=reg,
            buckets=LATENCY_BUCKETS,
        )
        self.mcp_server_up = Gauge(
            "mcp_server_up", "1 while the MCP server is initialised and listed.", ["server"], namespace=ns, registry=reg
        )
        self.mcp_server_tools = Gauge(
            "mcp_server_tools", "Tools the MCP server serves now.", ["server"], namespace=ns, registry=reg
        )
        self.mcp_restarts = Counter(
            "mcp_server_restarts", "Times an MCP server was connected again.", ["server"], namespace=ns, registry=reg
        )
        self._lookups: dict[str, list[int]] = defaultdict(lambda: [0, 0])

    def record_cache(self, tool: str, level: str) -> None:
        self.cache_lookups.labels(tool, level).inc()
        counts = self._lookups[tool]
        counts[0 if level == "miss" else 1] += 1
        self.cache_hit_ratio.labels(tool).set(counts[1] / (counts[0] + counts[1]))

    def record_mcp_call(self, server: str, tool: str, status: str, latency_s: float) -> None:
        self.mcp_calls.labels(server, tool, status).inc()
        self.mcp_latency.labels(server).observe(latency_s)
