"""The shipped dashboard and alert rules (k8s/components/prometheus): well formed, rendered by kustomize,
documented, and reading only metrics the services register (tests/e2e/test_make_run.py checks the same
against a running mesh's /metrics, vLLM's own metrics included)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import generate_latest

from gateway.admission import AdmissionMetrics
from services.inference.engine import Load
from services.inference.metrics import InferenceMetrics
from services.router.metrics import RouterMetrics
from services.runtime.metrics import Metrics
from services.tools.metrics import ToolMetrics
from tests.support import monitoring
from tests.support.promql import bucket_bounds, exported_names
from tests.unit.test_k8s import render

ROOT = Path(__file__).resolve().parents[2]
RUNBOOK = ROOT / "docs" / "operations" / "alerts.md"
ALERTS = {
    "AgentMeshTTFTBudgetBurn",
    "AgentMeshP0Shedding",
    "AgentMeshToolCircuitBreakerOpen",
    "AgentMeshInferenceReplicaDown",
    "AgentMeshNoInferenceReplica",
}
#: One metric per thing an operator is promised a panel for (issue 34): TTFT, inter-token latency, turn
#: latency, tool calls and errors, both caches, admission by priority, replica load, prefix-cache hits.
PANEL_METRICS = {
    "agentmesh_router_time_to_first_token_seconds_bucket",
    "vllm:inter_token_latency_seconds_bucket",
    "agentmesh_router_turn_seconds_bucket",
    "agentmesh_tool_calls_total",
    "agentmesh_tool_errors_total",
    "agentmesh_router_response_cache_lookups_total",
    "agentmesh_tool_cache_lookups_total",
    "agentmesh_gateway_admission_total",
    "agentmesh_inference_running_requests",
    "agentmesh_inference_queue_depth",
    "vllm:prefix_cache_hits_total",
}
DURATION = re.compile(r"([0-9]+(ms|[smhdwy]))+")


def registered_exposition() -> str:
    """What the four services register, as one page: the classes their builders use, inference as on vLLM
    (``per_request=False``: the engine exports its own latencies as ``vllm:*``)."""
    metrics = Metrics()
    RouterMetrics(metrics)
    ToolMetrics(metrics)
    AdmissionMetrics(metrics)
    InferenceMetrics(metrics, lambda: Load(0, 0, 0.0, 0.0, 1), per_request=False)
    return generate_latest(metrics.registry).decode()


def vllm_names() -> frozenset[str]:
    """The dashboard's vLLM names: the engine registers them only when it starts (checked in tests/e2e)."""
    names = {s.metric for q in monitoring.queries() for s in q.selectors()}
    return frozenset(n for n in names if n.startswith("vllm:"))


def test_every_query_parses_and_reads_a_metric() -> None:
    queries = monitoring.queries()
    assert len(queries) > 30
    for query in queries:
        assert query.selectors(), query.where


def test_every_query_names_only_registered_metrics() -> None:
    exported = exported_names(registered_exposition())
    assert monitoring.unknown_names(exported, also=vllm_names()) == []
    assert monitoring.unknown_buckets(bucket_bounds(registered_exposition())) == []


def test_the_check_fails_on_a_metric_nobody_exports() -> None:
    exported = exported_names(registered_exposition()) - {"agentmesh_router_turn_seconds_bucket"}
    unknown = monitoring.unknown_names(exported, also=vllm_names())
    assert unknown and all(u.endswith(": agentmesh_router_turn_seconds_bucket") for u in unknown)
    assert monitoring.unknown_buckets({}) != []  # the SLO's le="5.0" must be a bucket the histogram has


def test_the_dashboard_has_a_panel_for_each_promised_view() -> None:
    read = {s.metric for q in monitoring.queries() if q.where.startswith("panel") for s in q.selectors()}
    assert read >= PANEL_METRICS, PANEL_METRICS - read


def test_dashboard_panels_are_well_formed_and_do_not_overlap() -> None:
    board = monitoring.dashboard()
    assert board["uid"] == "agentmesh"
    assert [v["name"] for v in board["templating"]["list"]] == ["datasource"]
    ids: set[int] = set()
    cells: set[tuple[int, int]] = set()
    for panel in monitoring.panels(board):
        assert panel["id"] not in ids, panel["title"]
        ids.add(panel["id"])
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        mine = {(grid["x"] + dx, grid["y"] + dy) for dx in range(grid["w"]) for dy in range(grid["h"])}
        assert not mine & cells, f"{panel['title']} overlaps another panel"
        cells |= mine
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel.get("description"), panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs)), panel["title"]


def test_every_alert_is_annotated_and_has_its_runbook_section() -> None:
    alerts = monitoring.alert_rules(monitoring.rules())
    assert {a["alert"] for a in alerts} == ALERTS
    sections = set(re.findall(r"^## (AgentMesh\w+)$", RUNBOOK.read_text(), flags=re.MULTILINE))
    assert sections == ALERTS
    for alert in alerts:
        name, notes = alert["alert"], alert["annotations"]
        assert notes["summary"] and notes["description"], name
        # MkDocs' and GitHub's anchor of a heading that is one word: the word in lower case.
        assert notes["runbook_url"] == f"docs/operations/alerts.md#{name.lower()}", name
        assert alert["labels"]["severity"] in ("critical", "warning"), name
        assert DURATION.fullmatch(alert["for"]), name


def test_every_recording_is_read_by_an_alert() -> None:
    resource = monitoring.rules()
    read = {s.metric for q in monitoring.queries() if q.where.startswith("alert") for s in q.selectors()}
    assert monitoring.recorded(resource) <= read


def test_the_component_renders_the_dashboard_configmap_and_the_rule() -> None:
    docs = render(monitoring.COMPONENT)
    board = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "agentmesh-grafana-dashboard")
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert board["data"] == {"agentmesh-dashboard.json": monitoring.DASHBOARD.read_text()}
    rule = next(d for d in docs if d["kind"] == "PrometheusRule")
    assert rule == yaml.safe_load(monitoring.RULES.read_text())


def scraped_jobs(docs: list[dict[str, Any]]) -> set[str]:
    """The ``job`` of each Service a ServiceMonitor scrapes: the Prometheus Operator names it after the
    Service, and a Service without the endpoint's port is not scraped at all."""
    jobs = set()
    services = [d for d in docs if d["kind"] == "Service"]
    for monitor in (d for d in docs if d["kind"] == "ServiceMonitor"):
        wanted = monitor["spec"]["selector"]["matchLabels"].items()
        ports = {e["port"] for e in monitor["spec"]["endpoints"]}
        for service in services:
            named = {p.get("name") for p in service["spec"]["ports"]}
            if wanted <= service["metadata"].get("labels", {}).items() and ports & named:
                jobs.add(service["metadata"]["name"])
    return jobs


@pytest.mark.parametrize("where", ["panel", "alert"])
def test_every_job_a_query_names_is_scraped(where: str) -> None:
    jobs = scraped_jobs(render(ROOT / "k8s" / "overlays" / "production"))
    named = {
        job
        for q in monitoring.queries()
        if q.where.startswith(where)
        for s in q.selectors()
        if (job := s.equals("job")) is not None
    }
    assert named and named <= jobs, named - jobs
