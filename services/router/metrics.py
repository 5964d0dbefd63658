"""Router metrics: turns, steps, tool selection, replica picks (and why), failovers, response-cache hits, TTFT."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from services.runtime.metrics import LATENCY_BUCKETS, Metrics


class RouterMetrics:
    def __init__(self, metrics: Metrics) -> None:
        ns, reg = metrics.namespace, metrics.registry
        self._picked: dict[tuple[str, str], Counter] = {}
        self.turns = Counter("router_turns", "Agent turns by outcome.", ["outcome"], namespace=ns, registry=reg)
        self.turn_seconds = Histogram(
            "router_turn_seconds", "Whole-turn latency.", namespace=ns, registry=reg, buckets=LATENCY_BUCKETS
        )
        self.step_seconds = Histogram(
            "router_step_seconds",
            "Latency of each turn step.",
            ["step"],
            namespace=ns,
            registry=reg,
            buckets=LATENCY_BUCKETS,
        )
        self.ttft = Histogram(
            "router_time_to_first_token_seconds",
            "Turn start to first answer token.",
            namespace=ns,
            registry=reg,
            buckets=LATENCY_BUCKETS,
        )
        self.tool_calls = Counter(
            "router_tool_calls",
            "Tool calls made by turns, by tool and status.",
            ["tool", "status"],
            namespace=ns,
            registry=reg,
        )
        self.picks = Counter(
            "router_replica_picks",
            "Generations by replica and why it was chosen.",
            ["replica", "reason"],
            namespace=ns,
            registry=reg,
        )
        self.failovers = Counter(
            "router_failovers",
            "Generations moved to another replica, by when.",
            ["kind"],
            namespace=ns,
            registry=reg,
        )
        self.response_cache = Counter(
            "router_response_cache_lookups",
            "Response-cache lookups by result.",
            ["result"],
            namespace=ns,
            registry=reg,
        )
        self.cache_hits = self.response_cache.labels("hit")
        self.cache_misses = self.response_cache.labels("miss")
        self.cached_prompt_tokens = Counter(
            "router_cached_prompt_tokens",
            "Prompt tokens served from replicas' prefix caches.",
            namespace=ns,
            registry=reg,
        )
        self.prompt_tokens = Counter("router_prompt_tokens", "Prompt tokens sent.", namespace=ns, registry=reg)
        self.tool_selection = Counter(
            "router_tool_selections",
            "Tool selections by method (embedding, llm, named) and outcome (tools, none, ambiguous; evident, pinned,"
            " classified and not_applicable when planning overrules the selector).",
            ["method", "outcome"],
            namespace=ns,
            registry=reg,
        )
        self.selection_seconds = Histogram(
            "router_tool_selection_seconds",
            "Time to score a message against the tool cards (embedding selector only).",
            namespace=ns,
            registry=reg,
            buckets=LATENCY_BUCKETS,
        )
        self.dropped_calls = Counter(
            "router_dropped_calls",
            "Planned calls dropped before running, by reason (unparseable, ungrounded).",
            ["reason"],
            namespace=ns,
            registry=reg,
        )

    def picked(self, replica: str, reason: str) -> Counter:
        """``picks`` for one replica and reason, looked up once (it is counted on every generation)."""
        child = self._picked.get((replica, reason))
        if child is None:
            child = self._picked[(replica, reason)] = self.picks.labels(replica, reason)
        return child


def count_selection(metrics: RouterMetrics | None, method: str, outcome: str) -> None:
    """One tool-selection outcome (``tool_selection{method,outcome}``), where planning runs with metrics."""
    if metrics is not None:
        metrics.tool_selection.labels(method, outcome).inc()


def count_dropped(metrics: RouterMetrics | None, reason: str) -> None:
    """One planned call dropped before running (``dropped_calls{reason}``), where planning runs with metrics."""
    if metrics is not None:
        metrics.dropped_calls.labels(reason).inc()
