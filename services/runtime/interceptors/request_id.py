"""Request ids: take the caller's ``x-request-id`` or mint one, and echo it back.

The id lands in a contextvar (logs, error details, spans) and in the response's
trailing metadata so a client can quote it in a bug report.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import grpc.aio

from services.runtime.context import REQUEST_ID
from services.runtime.interceptors.base import CallNext, RpcInfo, RpcInterceptor

HEADER = "x-request-id"
_VALID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")


def new_request_id() -> str:
    return uuid.uuid4().hex


class RequestIdInterceptor(RpcInterceptor):
    """Sets ``REQUEST_ID`` for the RPC and returns it in trailing metadata."""

    async def around(self, info: RpcInfo, context: grpc.aio.ServicerContext[Any, Any], call_next: CallNext) -> Any:
        given = info.header(HEADER)
        request_id = given if given and _VALID.match(given) else new_request_id()
        token = REQUEST_ID.set(request_id)
        context.set_trailing_metadata(((HEADER, request_id),))
        try:
            return await call_next()
        finally:
            REQUEST_ID.reset(token)
