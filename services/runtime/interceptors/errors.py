"""Errors: map exceptions to gRPC statuses with rich details, never leaking a traceback.

``AgentMeshError`` subclasses become their status (see services.runtime.errors);
a failed downstream call keeps a safe code (UNAVAILABLE, DEADLINE_EXCEEDED,
RESOURCE_EXHAUSTED, CANCELLED) with a generic message; Redis not answering
(sessions, caches) is UNAVAILABLE with a retry hint, since it recovers without
us; anything else becomes
INTERNAL with the request id, and the full exception goes to the log.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import grpc
import grpc.aio
from redis.exceptions import RedisError

from services.runtime.context import REQUEST_ID
from services.runtime.errors import (
    AgentMeshError,
    Cancelled,
    DeadlineExceeded,
    ResourceExhausted,
    Unavailable,
    trailing_metadata,
)
from services.runtime.interceptors.base import CallNext, RpcInfo, RpcInterceptor
from services.runtime.interceptors.request_id import HEADER
from services.runtime.status_decode import rich_error_of

log = logging.getLogger(__name__)


def from_downstream(err: grpc.aio.AioRpcError) -> AgentMeshError:
    """What to tell our caller when a call we made failed."""
    code = err.code()
    rich = rich_error_of(err)
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return DeadlineExceeded("deadline exceeded in a downstream service")
    if code is grpc.StatusCode.CANCELLED:
        return Cancelled("the request was cancelled")
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED:
        return ResourceExhausted("a downstream service is overloaded", retry_after_s=rich.retry_after_s or 1.0)
    if code is grpc.StatusCode.UNAVAILABLE:
        return Unavailable("a downstream service is unavailable", retry_after_s=rich.retry_after_s)
    return AgentMeshError("internal error")


#: Retry hint while Redis does not answer (a restart takes about this long to be noticed).
STORE_RETRY_S = 1.0


def from_store(exc: RedisError) -> Unavailable:
    """What to tell our caller when Redis failed us: retryable, and not a bug of ours."""
    log.warning("Redis did not answer: %r", exc)
    return Unavailable(
        "the session store is unreachable; retry shortly", retry_after_s=STORE_RETRY_S, reason="STORE_UNAVAILABLE"
    )


def as_status_error(exc: Exception, method: str) -> AgentMeshError:
    """What the caller is told for ``exc``, raised while serving ``method`` (see module docstring): the one
    mapping for a call's own status and for a request's status on a multiplexed stream."""
    if isinstance(exc, AgentMeshError) and type(exc) is not AgentMeshError:
        return exc
    if isinstance(exc, grpc.aio.AioRpcError):
        log.warning("%s: downstream call failed: %s %s", method, exc.code().name, exc.details())
        return from_downstream(exc)
    if isinstance(exc, RedisError):
        return from_store(exc)
    if not isinstance(exc, AgentMeshError):
        log.error("%s: unhandled exception", method, exc_info=exc)
    request_id = REQUEST_ID.get()
    return AgentMeshError(f"internal error (request id {request_id})" if request_id else "internal error")


class ErrorInterceptor(RpcInterceptor):
    """Innermost interceptor: turns exceptions into ``context.abort`` with rich details."""

    async def around(self, info: RpcInfo, context: grpc.aio.ServicerContext[Any, Any], call_next: CallNext) -> Any:
        try:
            return await call_next()
        except (grpc.aio.AbortError, asyncio.CancelledError):
            raise
        except Exception as exc:
            await abort_with(context, as_status_error(exc, info.method))
        return None


async def abort_with(context: grpc.aio.ServicerContext[Any, Any], exc: AgentMeshError) -> None:
    """End the RPC with ``exc``'s status and rich details (for interceptors outside ErrorInterceptor)."""
    request_id = REQUEST_ID.get()
    md = (*trailing_metadata(exc, request_id), (HEADER, request_id)) if request_id else trailing_metadata(exc)
    await context.abort(exc.code, exc.message, md)
