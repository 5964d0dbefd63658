"""Metrics: per-RPC started/handled counts, latency and in-flight gauges."""

from __future__ import annotations

import time
from typing import Any

import grpc.aio

from services.runtime.interceptors.base import CallNext, RpcInfo, RpcInterceptor, final_code
from services.runtime.metrics import Metrics


class MetricsInterceptor(RpcInterceptor):
    """Records every RPC (health checks included: they are part of the load) in ``metrics``."""

    def __init__(self, metrics: Metrics) -> None:
        self._m = metrics

    async def around(self, info: RpcInfo, context: grpc.aio.ServicerContext[Any, Any], call_next: CallNext) -> Any:
        labels = (info.service, info.name, info.kind)
        self._m.rpc_started.labels(*labels).inc()
        in_flight = self._m.rpc_in_flight.labels(info.service, info.name)
        in_flight.inc()
        start = time.perf_counter()
        error: BaseException | None = None
        try:
            return await call_next()
        except BaseException as exc:
            error = exc
            raise
        finally:
            in_flight.dec()
            self._m.rpc_duration.labels(*labels).observe(time.perf_counter() - start)
            self._m.rpc_handled.labels(*labels, final_code(context, error).name).inc()
