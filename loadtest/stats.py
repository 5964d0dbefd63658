"""Latency statistics shared by the benchmarks (vLLM's benchmark definitions).

- TTFT: request sent → first output token received.
- ITL: gap between consecutive token-bearing messages of one request, divided
  evenly over the tokens the later message carried.
- Output throughput: completion tokens of all requests / wall time of the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass
class RequestTrace:
    """Client-side timeline of one request (perf_counter seconds)."""

    sent: float
    chunks: list[tuple[float, int]] = field(default_factory=list)  # (arrival, tokens in message)
    done: float | None = None
    error: str | None = None

    @property
    def tokens(self) -> int:
        return sum(n for _, n in self.chunks)

    @property
    def ttft(self) -> float | None:
        return self.chunks[0][0] - self.sent if self.chunks else None

    def itls(self) -> list[float]:
        gaps: list[float] = []
        for (t0, _), (t1, n) in zip(self.chunks, self.chunks[1:], strict=False):
            gaps.extend([(t1 - t0) / n] * n)
        return gaps


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else float("nan")


@dataclass(frozen=True)
class Summary:
    requests: int
    errors: int
    output_tokens: int
    wall_s: float
    ttft_p50: float
    ttft_p99: float
    itl_p50: float
    itl_p99: float

    @property
    def output_tok_s(self) -> float:
        return self.output_tokens / self.wall_s if self.wall_s > 0 else 0.0


def summarize(traces: Sequence[RequestTrace], wall_s: float) -> Summary:
    ok = [t for t in traces if t.error is None]
    ttfts = [t.ttft for t in ok if t.ttft is not None]
    itls = [g for t in ok for g in t.itls()]
    return Summary(
        requests=len(traces),
        errors=len(traces) - len(ok),
        output_tokens=sum(t.tokens for t in ok),
        wall_s=wall_s,
        ttft_p50=percentile(ttfts, 50),
        ttft_p99=percentile(ttfts, 99),
        itl_p50=percentile(itls, 50),
        itl_p99=percentile(itls, 99),
    )
