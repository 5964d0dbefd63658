"""The one mapping from the mesh's errors (gRPC status, rich details) to HTTP, in OpenAI's error shape.

    INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE   400 invalid_request_error, param = the field
    UNAUTHENTICATED                                       401 authentication_error
    PERMISSION_DENIED                                     403 permission_error
    NOT_FOUND                                             404 not_found_error
    ALREADY_EXISTS                                        409 conflict_error
    RESOURCE_EXHAUSTED (rate limit, quota)                429 rate_limit_error      + Retry-After
    RESOURCE_EXHAUSTED with reason SHED (admission)       503 overloaded_error      + Retry-After
    UNAVAILABLE                                           503 service_unavailable   + Retry-After when known
    DEADLINE_EXCEEDED                                     504 timeout_error
    CANCELLED                                             499 cancelled
    anything else                                         500 server_error

``Retry-After`` is whole seconds (rounded up, as RFC 9110 wants); ``retry-after-ms`` carries the exact
pushback, which the OpenAI SDKs prefer when present. ``code`` is the status's ErrorInfo reason, lower-cased
(``rate_limited``, ``shed``, ``unauthenticated``...).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import grpc

from services.runtime.errors import AgentMeshError

_BY_CODE: dict[grpc.StatusCode, tuple[int, str]] = {
    grpc.StatusCode.INVALID_ARGUMENT: (400, "invalid_request_error"),
    grpc.StatusCode.FAILED_PRECONDITION: (400, "invalid_request_error"),
    grpc.StatusCode.OUT_OF_RANGE: (400, "invalid_request_error"),
    grpc.StatusCode.UNAUTHENTICATED: (401, "authentication_error"),
    grpc.StatusCode.PERMISSION_DENIED: (403, "permission_error"),
    grpc.StatusCode.NOT_FOUND: (404, "not_found_error"),
    grpc.StatusCode.ALREADY_EXISTS: (409, "conflict_error"),
    grpc.StatusCode.RESOURCE_EXHAUSTED: (429, "rate_limit_error"),
    grpc.StatusCode.UNAVAILABLE: (503, "service_unavailable"),
    grpc.StatusCode.DEADLINE_EXCEEDED: (504, "timeout_error"),
    grpc.StatusCode.CANCELLED: (499, "cancelled"),
}
SHED_REASON = "SHED"


@dataclass(frozen=True)
class HttpError:
    """What an HTTP caller gets for an error: status, headers and the OpenAI-shaped body."""

    status: int
    headers: dict[str, str]
    body: dict[str, Any]


def http_error(error: AgentMeshError) -> HttpError:
    """The HTTP form of ``error`` (see the module docstring for the table)."""
    code = grpc.StatusCode[error.metadata["grpc_code"]] if "grpc_code" in error.metadata else error.code
    status, kind = _BY_CODE.get(code, (500, "server_error"))
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED and error.reason == SHED_REASON:
        status, kind = 503, "overloaded_error"
    headers: dict[str, str] = {}
    if error.retry_after_s is not None and status in (429, 503):
        headers["Retry-After"] = str(max(1, math.ceil(error.retry_after_s)))
        headers["retry-after-ms"] = str(max(0, round(error.retry_after_s * 1000)))
    violations = error.field_violations
    message = error.message if status != 500 else "internal error"
    body = {
        "error": {
            "message": message,
            "type": kind,
            "param": violations[0].field if violations else None,
            "code": error.reason.lower() if error.reason else None,
        }
    }
    return HttpError(status, headers, body)
