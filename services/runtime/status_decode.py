"""What a client learns from a failed call: rich status details decoded back into the taxonomy.

The server side (``services.runtime.errors``) encodes an error as a
google.rpc.Status; this module is the other end, used by clients, interceptors
and the router's links. Decoding goes through grpcio-status (``rpc_status``):
``from_call`` reads the status from the trailers, refusing details whose code
or message contradict the call's own status (a client then sees the plain
status). ``error_of`` turns the result into the exception a server would have
raised, so clients and servers share one exception tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import grpc
import grpc.aio
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from services.runtime.errors import (
    AgentMeshError,
    AlreadyExists,
    Cancelled,
    DeadlineExceeded,
    FailedPrecondition,
    FieldViolation,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)

_Detail = TypeVar("_Detail", bound=Message)


def code_from_number(number: int) -> grpc.StatusCode:
    """grpc.StatusCode for a google.rpc.Code number (UNKNOWN if out of range)."""
    for code in grpc.StatusCode:
        if code.value[0] == number:
            return code
    return grpc.StatusCode.UNKNOWN


@dataclass(frozen=True)
class RichError:
    """What a client learns from a failed call's status details."""

    code: grpc.StatusCode
    message: str
    reason: str = ""
    field_violations: tuple[FieldViolation, ...] = ()
    retry_after_s: float | None = None
    request_id: str = ""


def rich_error_of(call: grpc.aio.AioRpcError | grpc.Call) -> RichError:
    """Decode the rich details of a failed call (works for any server, not only ours)."""
    try:
        status: status_pb2.Status | None = rpc_status.from_call(call)
    except ValueError:  # details contradicting the call's own code or message are not trusted
        status = None
    return _decode(call.code(), call.details() or "", status)


def _decode(code: grpc.StatusCode, message: str, status: status_pb2.Status | None) -> RichError:
    if status is None:
        return RichError(code=code, message=message)
    info = _detail(status, error_details_pb2.ErrorInfo)
    bad = _detail(status, error_details_pb2.BadRequest)
    retry = _detail(status, error_details_pb2.RetryInfo)
    request = _detail(status, error_details_pb2.RequestInfo)
    return RichError(
        code=code,
        message=status.message,
        reason=info.reason if info else "",
        field_violations=tuple(FieldViolation(v.field, v.description) for v in bad.field_violations) if bad else (),
        retry_after_s=retry.retry_delay.ToNanoseconds() / 1e9 if retry else None,
        request_id=request.request_id if request else "",
    )


def _detail(status: status_pb2.Status, kind: type[_Detail]) -> _Detail | None:
    """The first detail of type ``kind`` in ``status``, unpacked (details of other types are skipped)."""
    for any_msg in status.details:
        detail = kind()
        if any_msg.Unpack(detail):
            return detail
    return None


def rich_error_of_status(status: status_pb2.Status) -> RichError:
    """Decode a google.rpc.Status carried in a message (``TurnCompleted.status``) rather than in trailers."""
    return _decode(code_from_number(status.code), status.message, status)


def error_of(rich: RichError) -> AgentMeshError:
    """The taxonomy's exception for a decoded status, so clients raise what servers raise.

    A code the taxonomy does not name (UNKNOWN, UNIMPLEMENTED, DATA_LOSS, ...) becomes the base class, whose
    code is INTERNAL; the original code stays in ``metadata["grpc_code"]``.
    """
    metadata = {"grpc_code": rich.code.name, **({"request_id": rich.request_id} if rich.request_id else {})}
    reason = rich.reason or None
    if rich.code is grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidArgument(rich.message, rich.field_violations, reason=reason)
    if rich.code is grpc.StatusCode.RESOURCE_EXHAUSTED:
        return ResourceExhausted(rich.message, retry_after_s=rich.retry_after_s, reason=reason, metadata=metadata)
    if rich.code is grpc.StatusCode.UNAVAILABLE:
        return Unavailable(rich.message, retry_after_s=rich.retry_after_s, reason=reason, metadata=metadata)
    for kind in (
        NotFound,
        AlreadyExists,
        FailedPrecondition,
        Unauthenticated,
        PermissionDenied,
        DeadlineExceeded,
        Cancelled,
    ):
        if rich.code is kind.code:
            return kind(rich.message, reason=reason, metadata=metadata)
    return AgentMeshError(rich.message, reason=reason, metadata=metadata)
