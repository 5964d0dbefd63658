"""Metrics: per-RPC started/handled counts, latency and in-flight gauges.

The labelled children of one method are looked up once and kept (``labels()``
takes a lock and builds a key on every call; a method's labels never change).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
from prometheus_client import Counter, Gauge, Histogram

from services.runtime.interceptors.base import CallNext, RpcInfo, RpcInterceptor, final_code
from services.runtime.metrics import Metrics


@dataclass
class _MethodMetrics:
    started: Counter
    in_flight: Gauge
    duration: Histogram
    handled: dict[grpc.StatusCode, Counter]


class MetricsInterceptor(RpcInterceptor):
    """Records every RPC (health checks included: they are part of the load) in ``metrics``."""

    def __init__(self, metrics: Metrics) -> None:
        self._m = metrics
        self._methods: dict[tuple[str, str, str], _MethodMetrics] = {}

    def _of(self, info: RpcInfo) -> _MethodMetrics:
        labels = (info.service, info.name, info.kind)
        found = self._methods.get(labels)
        if found is None:
            m = self._m
            found = _MethodMetrics(
                m.rpc_started.labels(*labels),
                m.rpc_in_flight.labels(info.service, info.name),
                m.rpc_duration.labels(*labels),
                {},
            )
            self._methods[labels] = found
        return found

    def _handled(self, info: RpcInfo, method: _MethodMetrics, code: grpc.StatusCode) -> Counter:
        counter = method.handled.get(code)
        if counter is None:
            counter = method.handled[code] = self._m.rpc_handled.labels(info.service, info.name, info.kind, code.name)
        return counter

    async def around(self, info: RpcInfo, context: grpc.aio.ServicerContext[Any, Any], call_next: CallNext) -> Any:
        method = self._of(info)
        method.started.inc()
        method.in_flight.inc()
        start = time.perf_counter()
        error: BaseException | None = None
        try:
            return await call_next()
        except BaseException as exc:
            error = exc
            raise
        finally:
            method.in_flight.dec()
            method.duration.observe(time.perf_counter() - start)
            self._handled(info, method, final_code(context, error)).inc()
