"""Benchmark statistics on hand-made timelines."""

from __future__ import annotations

import pytest

from loadtest.stats import RequestTrace, Slo, by_priority, percentile, summarize


def test_ttft_tpot_itl_e2e_follow_vllm_definitions() -> None:
    trace = RequestTrace(sent=10.0, chunks=[(10.5, 1), (10.7, 1), (11.1, 2)], done=11.1)
    assert trace.ttft == pytest.approx(0.5)
    assert trace.itls() == pytest.approx([0.2, 0.2, 0.2])
    assert trace.e2e == pytest.approx(1.1)
    assert trace.tpot == pytest.approx((1.1 - 0.5) / 3)
    assert trace.tokens == 4
    assert RequestTrace(sent=0, chunks=[(1, 1)], done=1).tpot is None


def test_summary_excludes_warmup_and_failures_and_computes_throughput() -> None:
    good = RequestTrace(sent=0.0, chunks=[(0.1, 1), (0.2, 1)], done=0.2)
    slow = RequestTrace(sent=0.0, chunks=[(1.5, 1), (1.6, 1)], done=1.6)
    bad = RequestTrace(sent=0.0, error="RESOURCE_EXHAUSTED")
    warm = RequestTrace(sent=0.0, chunks=[(9.0, 50)], done=9.0, warmup=True)
    s = summarize([good, slow, bad, warm], wall_s=2.0, slo=Slo(ttft_s=1.0))
    assert (s.requests, s.errors, s.output_tokens) == (3, 1, 4)
    assert s.output_tok_s == pytest.approx(2.0) and s.request_rps == pytest.approx(1.0)
    assert s.goodput_rps == pytest.approx(0.5)  # only `good` met the 1 s TTFT SLO
    assert s.errors_by_code == {"RESOURCE_EXHAUSTED": 1}
    assert s.ttft.p50 == pytest.approx(0.8) and s.ttft.mean == pytest.approx(0.8)
    assert s.itl.p50 == pytest.approx(0.1)


def test_breakdown_by_priority() -> None:
    traces = [RequestTrace(sent=0, chunks=[(0.1, 1)], done=0.1, priority=p) for p in (0, 0, 2)]
    parts = by_priority(traces, wall_s=1.0)
    assert sorted(parts) == [0, 2] and parts[0].requests == 2 and parts[2].requests == 1


def test_percentile_interpolates() -> None:
    assert percentile([1, 2, 3, 4], 50) == pytest.approx(2.5)
    assert percentile(list(range(101)), 99) == pytest.approx(99)
