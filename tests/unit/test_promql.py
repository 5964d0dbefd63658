"""The PromQL reader of the dashboard tests (tests/support/promql.py): names found, everything else left out."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from tests.support.promql import Selector, bucket_bounds, exported_names, metric_names, selectors


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("up", {"up"}),
        ('up{job="agentmesh-inference"} == 0', {"up"}),
        (
            "histogram_quantile(0.99, sum by (le, pod) (rate(vllm:time_to_first_token_seconds_bucket[5m])))",
            {"vllm:time_to_first_token_seconds_bucket"},
        ),
        ("sum(rate(a_total[$__rate_interval])) by (tool) / sum without (le) (b_count)", {"a_total", "b_count"}),
        ("a / on (pod) group_left (model) b", {"a", "b"}),
        ("a / ignoring(le) group_right b > bool 0", {"a", "b"}),
        ("max_over_time(a[1h:5m]) offset 1d and b @ start()", {"a", "b"}),
        ('absent(up{job="x"}) or vector(0) unless c', {"up", "c"}),
        ('{__name__="quoted_name", tool="calculator"}', {"quoted_name"}),
        ('{"dotted.name", tool=~"a|b"}', {"dotted.name"}),
        ('label_replace(a, "dst", "$1", "src", "(.*)")', {"a"}),
        ('count_values("version", build_info)', {"build_info"}),
        ("topk(3, sum by (tool) (x)) * 1e3 + 0.5 - Inf", {"x"}),
        ("agentmesh:ttft_slow:ratio_rate1h > (14.4 * 0.01)", {"agentmesh:ttft_slow:ratio_rate1h"}),
        ("SUM BY (le) (a)  # trailing comment names_nothing", {"a"}),
    ],
)
def test_metric_names_are_what_selectors_read(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_label_matchers_are_kept_with_their_selector() -> None:
    found = selectors('rate(x_bucket{le="5.0", job!~"a.*", pod!="p\\"q"}[5m])')
    assert found == [Selector("x_bucket", (("le", "=", "5.0"), ("job", "!~", "a.*"), ("pod", "!=", 'p"q')))]
    assert found[0].equals("le") == "5.0" and found[0].equals("job") is None


@pytest.mark.parametrize(
    ("expr", "complaint"),
    [
        ("rat(x[5m])", "unknown PromQL function 'rat'"),
        ("sum(rate(x[5m])", "unbalanced parentheses"),
        ("x{job=}", "bad label matcher"),
        ('{job="a"}', "without a metric name"),
        ("x[5m", "unclosed"),
        ("x ; y", "unexpected"),
    ],
)
def test_what_is_not_promql_is_refused(expr: str, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        selectors(expr)


def test_exported_names_count_declared_families_without_samples() -> None:
    registry = CollectorRegistry()
    Counter("calls", "calls", ["tool"], registry=registry)  # labelled, never used: no samples yet
    Histogram("wait_seconds", "wait", buckets=(1, 2.5), registry=registry)
    Gauge("ns:depth", "depth", registry=registry)
    text = generate_latest(registry).decode()
    names = exported_names(text)
    assert {"calls_total", "wait_seconds_bucket", "wait_seconds_sum", "wait_seconds_count", "ns:depth"} <= names
    assert "calls" not in names and "wait_seconds" not in names
    assert bucket_bounds(text) == {"wait_seconds_bucket": {"1.0", "2.5", "+Inf"}}
