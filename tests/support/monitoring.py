"""The shipped Grafana dashboard and Prometheus alert rules, read as the queries they run.

Both live in ``k8s/components/prometheus/``. ``queries`` lists every PromQL
expression in them with where it sits (a panel's target, a rule), and
``unknown_names`` says which of the metric names they read a set of exported
names lacks: the check the unit test runs against the services' registries and
the e2e test against the running mesh's ``/metrics`` pages.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.promql import PROMETHEUS_OWN, Selector, selectors

COMPONENT = Path(__file__).resolve().parents[2] / "k8s" / "components" / "prometheus"
DASHBOARD = COMPONENT / "agentmesh-dashboard.json"
RULES = COMPONENT / "alerts.yaml"


@dataclass(frozen=True)
class Query:
    """One PromQL expression and where it is (``panel 'Title' A``, ``alert Name``, ``record name``)."""

    where: str
    expr: str

    def selectors(self) -> list[Selector]:
        return selectors(self.expr)


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def rules() -> dict[str, Any]:
    """The PrometheusRule resource."""
    loaded: dict[str, Any] = yaml.safe_load(RULES.read_text())
    return loaded


def panels(board: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, rows' nested panels included."""
    for panel in board.get("panels", []):
        yield panel
        yield from panels(panel)


def alert_rules(resource: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [r for g in resource["spec"]["groups"] for r in g["rules"] if "alert" in r]


def recorded(resource: Mapping[str, Any]) -> set[str]:
    """The series the recording rules write."""
    return {r["record"] for g in resource["spec"]["groups"] for r in g["rules"] if "record" in r}


def queries() -> list[Query]:
    """Every expression of the dashboard (panel targets) and of the rules (alerts and recordings)."""
    found = [
        Query(f"panel {panel['title']!r} {target['refId']}", target["expr"])
        for panel in panels(dashboard())
        for target in panel.get("targets", [])
    ]
    for group in rules()["spec"]["groups"]:
        for rule in group["rules"]:
            kind = "alert" if "alert" in rule else "record"
            found.append(Query(f"{kind} {rule[kind]}", rule["expr"]))
    return found


def unknown_names(exported: set[str], *, also: frozenset[str] = frozenset()) -> list[str]:
    """``where: name`` for each metric name a query reads that is neither exported, recorded by the rules,
    Prometheus's own per-target series, nor in ``also``."""
    known = exported | recorded(rules()) | PROMETHEUS_OWN | also
    return [
        f"{query.where}: {name}"
        for query in queries()
        for name in sorted({s.metric for s in query.selectors()})
        if name not in known
    ]


def unknown_buckets(bounds: Mapping[str, set[str]]) -> list[str]:
    """``where: name{le="x"}`` for each ``le`` a query matches that the histogram does not export
    (Prometheus matches label values as strings: ``le="5"`` finds nothing where the bucket is ``5.0``)."""
    return [
        f'{query.where}: {s.metric}{{le="{le}"}}'
        for query in queries()
        for s in query.selectors()
        if (le := s.equals("le")) is not None and le not in bounds.get(s.metric, set())
    ]
