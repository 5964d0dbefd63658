"""Metrics: per-RPC started/handled counts, latency and in-flight gauges.

The labelled children of one method are looked up once and kept (``labels()``
takes a lock and builds a key on every call; a method's labels never change).
"""

from __future__ import annotations

import time
from typing import Any

import grpc
import grpc.aio
from prometheus_client import Counter, Gauge, Histogram

from services.runtime.interceptors.base import CallNext, RpcInfo, RpcInterceptor, final_code
from services.runtime.metrics import Metrics


class MethodRecorder:
    """The server RPC metrics of one method: started, in flight, duration, handled by code. Also for requests that
    stand for an RPC without being a call of their own (a Complete on a gateway's Relay stream)."""

    def __init__(self, metrics: Metrics, service: str, name: str, kind: str) -> None:
        self._m = metrics
        self._labels = (service, name, kind)
        self._started: Counter = metrics.rpc_started.labels(*self._labels)
        self._in_flight: Gauge = metrics.rpc_in_flight.labels(service, name)
        self._duration: Histogram = metrics.rpc_duration.labels(*self._labels)
        self._handled: dict[grpc.StatusCode, Counter] = {}

    def started(self) -> float:
        """Count one start; the time to hand back to ``ended``."""
        self._started.inc()
        self._in_flight.inc()
        return time.perf_counter()

    def ended(self, began: float, code: grpc.StatusCode) -> None:
        self._in_flight.dec()
        self._duration.observe(time.perf_counter() - began)
        counter = self._handled.get(code)
        if counter is None:
            counter = self._handled[code] = self._m.rpc_handled.labels(*self._labels, code.name)
        counter.inc()


class MetricsInterceptor(RpcInterceptor):
    """Records every RPC (health checks included: they are part of the load) in ``metrics``."""

    def __init__(self, metrics: Metrics) -> None:
        self._m = metrics
        self._methods: dict[tuple[str, str, str], MethodRecorder] = {}

    def _of(self, info: RpcInfo) -> MethodRecorder:
        labels = (info.service, info.name, info.kind)
        found = self._methods.get(labels)
        if found is None:
            found = self._methods[labels] = MethodRecorder(self._m, *labels)
        return found

    async def around(self, info: RpcInfo, context: grpc.aio.ServicerContext[Any, Any], call_next: CallNext) -> Any:
        method = self._of(info)
        began = method.started()
        error: BaseException | None = None
        try:
            return await call_next()
        except BaseException as exc:
            error = exc
            raise
        finally:
            method.ended(began, final_code(context, error))
