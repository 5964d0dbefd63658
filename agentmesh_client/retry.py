"""When the client retries: only where the server said it may, after the wait the server asked for.

The gateway answers overload and rate limits with RESOURCE_EXHAUSTED carrying RetryInfo and
``grpc-retry-pushback-ms``, and a draining or routerless gateway with UNAVAILABLE. Those are the only
retried failures, and only before the server accepted the work (no TurnStarted, no Complete event yet):
after that a retry could run tools twice or repeat an answer. The wait is the server's pushback when it
gives one (a pushback longer than ``max_wait_s``, or past the call's deadline, ends retrying — waiting
blind would only add load), else jittered exponential backoff.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import grpc
import grpc.aio

from services.runtime.errors import RETRY_PUSHBACK_KEY, AgentMeshError, ResourceExhausted, Unavailable
from services.runtime.status_decode import error_of, rich_error_of


@dataclass(frozen=True)
class RetryPolicy:
    """``attempts`` tries in all (1: never retry); pushback up to ``max_wait_s`` is honoured."""

    attempts: int = 3
    max_wait_s: float = 10.0
    backoff_s: float = 0.2

    @classmethod
    def never(cls) -> RetryPolicy:
        """No retries: for proxies such as the HTTP edge, which pass the pushback on to their own callers."""
        return cls(attempts=1)

    def delay(self, error: AgentMeshError, attempt: int, remaining_s: float | None) -> float | None:
        """Seconds to wait before try ``attempt + 1`` (``attempt`` counts from 0), or None to give up."""
        if attempt + 1 >= self.attempts or not isinstance(error, ResourceExhausted | Unavailable):
            return None
        wait = error.retry_after_s
        if wait is None:
            wait = self.backoff_s * (2**attempt) * random.uniform(0.5, 1.5)
        if wait > self.max_wait_s or (remaining_s is not None and wait >= remaining_s):
            return None
        return wait


def error_of_call(error: grpc.aio.AioRpcError) -> AgentMeshError:
    """The taxonomy's exception for a failed call, its pushback read from RetryInfo or the pushback header."""
    rich = rich_error_of(error)
    if rich.retry_after_s is None and rich.code is grpc.StatusCode.RESOURCE_EXHAUSTED:
        for key, value in error.trailing_metadata() or ():
            if key == RETRY_PUSHBACK_KEY and isinstance(value, str) and value.isdigit():
                return ResourceExhausted(rich.message, retry_after_s=int(value) / 1000, reason=rich.reason or None)
    return error_of(rich)
