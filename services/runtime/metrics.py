"""Prometheus metrics: a registry per process and the HTTP endpoint that serves it.

Each process builds one ``Metrics`` and passes it to whatever records (no
module-level singletons, so tests can run many servers in one process without
their counters mixing).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.metrics_core import Metric

log = logging.getLogger(__name__)

#: Latency buckets from sub-millisecond hops to minute-long streams.
LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    120,
)


@dataclass
class Metrics:
    """The process's registry plus the per-RPC server metrics every service exports."""

    namespace: str = "agentmesh"
    registry: CollectorRegistry = field(default_factory=lambda: CollectorRegistry(auto_describe=True))

    def __post_init__(self) -> None:
        labels = ["grpc_service", "grpc_method", "grpc_type"]
        self.rpc_started = Counter(
            "rpc_server_started",
            "RPCs started on the server.",
            labels,
            namespace=self.namespace,
            registry=self.registry,
        )
        self.rpc_handled = Counter(
            "rpc_server_handled",
            "RPCs completed on the server, by status code.",
            [*labels, "grpc_code"],
            namespace=self.namespace,
            registry=self.registry,
        )
        self.rpc_duration = Histogram(
            "rpc_server_handling_seconds",
            "Time from RPC start to final status (whole stream for streaming RPCs).",
            labels,
            namespace=self.namespace,
            registry=self.registry,
            buckets=LATENCY_BUCKETS,
        )
        self.rpc_in_flight = Gauge(
            "rpc_server_in_flight",
            "RPCs being handled now.",
            ["grpc_service", "grpc_method"],
            namespace=self.namespace,
            registry=self.registry,
        )


class _Union:
    """Several registries scraped as one (ours, and a library's own such as vLLM's global one)."""

    def __init__(self, registries: Sequence[CollectorRegistry]) -> None:
        self._registries = registries

    def collect(self) -> Iterator[Metric]:
        for registry in self._registries:
            yield from registry.collect()


class MetricsServer:
    """The HTTP endpoint (``/metrics``) of the process's registry (and ``also``), on a daemon thread."""

    def __init__(self, metrics: Metrics, host: str, port: int, *, also: Sequence[CollectorRegistry] = ()) -> None:
        self._server: WSGIServer
        self._thread: threading.Thread
        registry: Any = _Union([metrics.registry, *also]) if also else metrics.registry
        self._server, self._thread = start_http_server(port, addr=host, registry=registry)
        self.port: int = self._server.server_port
        log.info("metrics on http://%s:%d/metrics", host, self.port)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
