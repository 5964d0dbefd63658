"""Benchmark statistics on hand-made timelines."""

from __future__ import annotations

import pytest

from loadtest.stats import RequestTrace, percentile, summarize


def test_ttft_and_itl_follow_vllm_definitions() -> None:
    trace = RequestTrace(sent=10.0, chunks=[(10.5, 1), (10.7, 1), (11.1, 2)], done=11.1)
    assert trace.ttft == pytest.approx(0.5)
    assert trace.itls() == pytest.approx([0.2, 0.2, 0.2])
    assert trace.tokens == 4


def test_summary_ignores_failed_requests_and_computes_throughput() -> None:
    good = RequestTrace(sent=0.0, chunks=[(0.1, 1), (0.2, 1)], done=0.2)
    bad = RequestTrace(sent=0.0, error="UNAVAILABLE")
    s = summarize([good, bad], wall_s=2.0)
    assert (s.requests, s.errors, s.output_tokens) == (2, 1, 2)
    assert s.output_tok_s == pytest.approx(1.0)
    assert s.ttft_p50 == pytest.approx(0.1)
    assert s.itl_p50 == pytest.approx(0.1)


def test_percentile_interpolates() -> None:
    assert percentile([1, 2, 3, 4], 50) == pytest.approx(2.5)
    assert percentile(list(range(101)), 99) == pytest.approx(99)
