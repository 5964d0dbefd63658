"""Deadlines: record the RPC's absolute deadline so downstream calls can inherit it."""

from __future__ import annotations

import time
from typing import Any

import grpc.aio

from services.runtime.context import DEADLINE
from services.runtime.interceptors.base import CallNext, RpcInfo, RpcInterceptor


class DeadlineInterceptor(RpcInterceptor):
    """Sets ``DEADLINE`` from ``context.time_remaining()`` (None when the caller set none)."""

    async def around(self, info: RpcInfo, context: grpc.aio.ServicerContext[Any, Any], call_next: CallNext) -> Any:
        remaining = context.time_remaining()
        expires_at = None if remaining is None else time.monotonic() + remaining
        token = DEADLINE.set(expires_at)
        try:
            return await call_next()
        finally:
            DEADLINE.reset(token)
