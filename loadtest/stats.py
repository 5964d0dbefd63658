"""Latency statistics with vLLM's benchmark definitions.

- TTFT: request sent → first output token received.
- TPOT: (end-to-end − TTFT) / (output tokens − 1), per request (requests with one token have none).
- ITL: gap between consecutive token-bearing messages of one request, divided
  evenly over the tokens the later message carried.
- E2E: request sent → last message.
- Throughput: requests, and output tokens, per second of wall time.
- Goodput: requests per second that met every SLO given (TTFT, TPOT, E2E).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

PERCENTILES = (50, 90, 95, 99)


@dataclass
class RequestTrace:
    """Client-side timeline of one request (perf_counter seconds)."""

    sent: float
    chunks: list[tuple[float, int]] = field(default_factory=list)  # (arrival, tokens in message)
    done: float | None = None
    error: str | None = None  # gRPC status code name when it failed
    priority: int = 1
    warmup: bool = False

    @property
    def tokens(self) -> int:
        return sum(n for _, n in self.chunks)

    @property
    def ttft(self) -> float | None:
        return self.chunks[0][0] - self.sent if self.chunks else None

    @property
    def e2e(self) -> float | None:
        end = self.done if self.done is not None else (self.chunks[-1][0] if self.chunks else None)
        return None if end is None else end - self.sent

    @property
    def tpot(self) -> float | None:
        if self.tokens < 2 or self.ttft is None or self.e2e is None:
            return None
        return (self.e2e - self.ttft) / (self.tokens - 1)

    def itls(self) -> list[float]:
        gaps: list[float] = []
        for (t0, _), (t1, n) in zip(self.chunks, self.chunks[1:], strict=False):
            gaps.extend([(t1 - t0) / n] * n)
        return gaps


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else float("nan")


@dataclass(frozen=True)
class Distribution:
    mean: float
    p50: float
    p90: float
    p95: float
    p99: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Distribution:
        mean = float(np.mean(values)) if len(values) else float("nan")
        return cls(mean, *(percentile(values, q) for q in PERCENTILES))


@dataclass(frozen=True)
class Slo:
    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None

    def met(self, t: RequestTrace) -> bool:
        checks = ((self.ttft_s, t.ttft), (self.tpot_s, t.tpot), (self.e2e_s, t.e2e))
        return t.error is None and all(limit is None or (v is not None and v <= limit) for limit, v in checks)


@dataclass(frozen=True)
class Summary:
    requests: int
    errors: int
    output_tokens: int
    wall_s: float
    ttft: Distribution
    tpot: Distribution
    itl: Distribution
    e2e: Distribution
    goodput_rps: float
    errors_by_code: dict[str, int]

    @property
    def output_tok_s(self) -> float:
        return self.output_tokens / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def request_rps(self) -> float:
        return (self.requests - self.errors) / self.wall_s if self.wall_s > 0 else 0.0

    # Shorthands used by reports.
    @property
    def ttft_p50(self) -> float:
        return self.ttft.p50

    @property
    def ttft_p99(self) -> float:
        return self.ttft.p99

    @property
    def itl_p50(self) -> float:
        return self.itl.p50

    @property
    def itl_p99(self) -> float:
        return self.itl.p99


def summarize(traces: Sequence[RequestTrace], wall_s: float, slo: Slo | None = None) -> Summary:
    """Statistics of the non-warm-up traces."""
    measured = [t for t in traces if not t.warmup]
    ok = [t for t in measured if t.error is None]
    slo = slo or Slo()
    return Summary(
        requests=len(measured),
        errors=len(measured) - len(ok),
        output_tokens=sum(t.tokens for t in ok),
        wall_s=wall_s,
        ttft=Distribution.of([v for t in ok if (v := t.ttft) is not None]),
        tpot=Distribution.of([v for t in ok if (v := t.tpot) is not None]),
        itl=Distribution.of([g for t in ok for g in t.itls()]),
        e2e=Distribution.of([v for t in ok if (v := t.e2e) is not None]),
        goodput_rps=sum(slo.met(t) for t in ok) / wall_s if wall_s > 0 else 0.0,
        errors_by_code=dict(Counter(t.error for t in measured if t.error is not None)),
    )


def by_priority(traces: Sequence[RequestTrace], wall_s: float, slo: Slo | None = None) -> dict[int, Summary]:
    return {
        p: summarize([t for t in traces if t.priority == p], wall_s, slo) for p in sorted({t.priority for t in traces})
    }
