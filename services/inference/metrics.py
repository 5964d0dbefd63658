"""Inference metrics: what only the service knows, plus per-request latencies where the engine has none.

vLLM exports its own Prometheus metrics (``vllm:*``: TTFT, inter-token
latency, end-to-end latency, tokens, prefix-cache hits) from the same process;
the service serves that registry beside its own and does not recompute them
per token in Python (``per_request=False``). The simulator has no metrics of its
own, so for it the service measures them (``per_request=True``). Always ours:
finished requests by reason (aborts by the caller are ours to know), and the
load gauges the router and the autoscaler read.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import Counter, Gauge, Histogram

from services.inference.engine import Load
from services.runtime.metrics import LATENCY_BUCKETS, Metrics

ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56)


class InferenceMetrics:
    """Registered on the process's registry; load gauges read the engine when scraped."""

    def __init__(self, metrics: Metrics, load: Callable[[], Load], *, per_request: bool = True) -> None:
        ns, reg = metrics.namespace, metrics.registry
        #: Whether the service measures per-request latencies and tokens (the engine exports none of its own).
        self.per_request = per_request
        self.requests = Counter(
            "inference_requests",
            "Finished generations by finish reason.",
            ["finish_reason"],
            namespace=ns,
            registry=reg,
        )
        reg_or_none = reg if per_request else None  # unregistered: never scraped, never fed
        self.ttft = Histogram(
            "inference_time_to_first_token_seconds",
            "Submit to first token.",
            namespace=ns,
            registry=reg_or_none,
            buckets=LATENCY_BUCKETS,
        )
        self.itl = Histogram(
            "inference_inter_token_latency_seconds",
            "Time between consecutive tokens of a request.",
            namespace=ns,
            registry=reg_or_none,
            buckets=ITL_BUCKETS,
        )
        self.e2e = Histogram(
            "inference_e2e_latency_seconds",
            "Submit to last token.",
            namespace=ns,
            registry=reg_or_none,
            buckets=LATENCY_BUCKETS,
        )
        self.prompt_tokens = Counter("inference_prompt_tokens", "Prompt tokens.", namespace=ns, registry=reg_or_none)
        self.completion_tokens = Counter(
            "inference_completion_tokens", "Generated tokens.", namespace=ns, registry=reg_or_none
        )
        self.cached_prompt_tokens = Counter(
            "inference_cached_prompt_tokens",
            "Prompt tokens served from the prefix cache.",
            namespace=ns,
            registry=reg_or_none,
        )
        running = Gauge("inference_running_requests", "Requests running in the engine.", namespace=ns, registry=reg)
        running.set_function(lambda: load().running)
        waiting = Gauge("inference_queue_depth", "Requests waiting in the engine's queue.", namespace=ns, registry=reg)
        waiting.set_function(lambda: load().waiting)
        kv = Gauge("inference_kv_cache_usage_ratio", "KV cache in use, 0-1.", namespace=ns, registry=reg)
        kv.set_function(lambda: load().kv_cache_usage)
        hits = Gauge(
            "inference_prefix_cache_hit_ratio",
            "Prompt tokens served from the prefix cache, 0-1.",
            namespace=ns,
            registry=reg,
        )
        hits.set_function(lambda: load().prefix_cache_hit_rate)
