"""The AgentMesh error taxonomy and its single mapping to gRPC status codes.

Domain code raises these; the error interceptor turns them into a gRPC status
with rich details (google.rpc.Status in ``grpc-status-details-bin``), and
multiplexed streams turn them into per-request ``RequestError`` messages. One
place decides what a client sees::

    AgentMeshError            INTERNAL (generic message; the exception is logged)
    ├── InvalidArgument       INVALID_ARGUMENT   + BadRequest field violations
    ├── NotFound              NOT_FOUND
    ├── AlreadyExists         ALREADY_EXISTS
    ├── FailedPrecondition    FAILED_PRECONDITION
    ├── Unauthenticated       UNAUTHENTICATED
    ├── PermissionDenied      PERMISSION_DENIED
    ├── ResourceExhausted     RESOURCE_EXHAUSTED + RetryInfo, grpc-retry-pushback-ms
    ├── Unavailable           UNAVAILABLE        + RetryInfo when known
    ├── DeadlineExceeded      DEADLINE_EXCEEDED
    └── Cancelled             CANCELLED

Every status also carries ErrorInfo (reason, domain "agentmesh") and, when
known, RequestInfo with the request id. Stack traces never leave the process.

The details travel the standard way, through grpcio-status (``rpc_status``):
this module encodes them (``to_rpc_status``, ``trailing_metadata``); clients
read them back with ``services.runtime.status_decode``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import grpc
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from agentmesh.common.v1 import common_pb2
from services.runtime.protoutil import duration

DOMAIN = "agentmesh"
STATUS_DETAILS_KEY = "grpc-status-details-bin"
RETRY_PUSHBACK_KEY = "grpc-retry-pushback-ms"


@dataclass(frozen=True)
class FieldViolation:
    """One bad field of a request: its path (``sampling.max_tokens``) and why."""

    field: str
    description: str


class AgentMeshError(Exception):
    """Base of every error the mesh reports to callers on purpose."""

    code: ClassVar[grpc.StatusCode] = grpc.StatusCode.INTERNAL
    default_reason: ClassVar[str] = "INTERNAL"

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason or self.default_reason
        self.metadata = dict(metadata or {})

    @property
    def retry_after_s(self) -> float | None:
        """Seconds the caller should wait before retrying, when that is known."""
        return None

    @property
    def field_violations(self) -> Sequence[FieldViolation]:
        return ()


class InvalidArgument(AgentMeshError):
    """The request is malformed; ``violations`` name the fields at fault."""

    code = grpc.StatusCode.INVALID_ARGUMENT
    default_reason = "INVALID_ARGUMENT"

    def __init__(
        self,
        message: str,
        violations: Sequence[FieldViolation] = (),
        *,
        reason: str | None = None,
    ) -> None:
        super().__init__(message, reason=reason)
        self.violations = tuple(violations)

    @classmethod
    def field(cls, field: str, description: str, *, reason: str | None = None) -> InvalidArgument:
        """The common case: one bad field, the message naming it."""
        return cls(f"{field}: {description}", [FieldViolation(field, description)], reason=reason)

    @property
    def field_violations(self) -> Sequence[FieldViolation]:
        return self.violations


class NotFound(AgentMeshError):
    """The named entity does not exist (or belongs to another tenant)."""

    code = grpc.StatusCode.NOT_FOUND
    default_reason = "NOT_FOUND"


class AlreadyExists(AgentMeshError):
    """An id that must be unique is already in use."""

    code = grpc.StatusCode.ALREADY_EXISTS
    default_reason = "ALREADY_EXISTS"


class FailedPrecondition(AgentMeshError):
    """The system is not in a state that allows the operation."""

    code = grpc.StatusCode.FAILED_PRECONDITION
    default_reason = "FAILED_PRECONDITION"


class Unauthenticated(AgentMeshError):
    """Missing or invalid credentials."""

    code = grpc.StatusCode.UNAUTHENTICATED
    default_reason = "UNAUTHENTICATED"


class PermissionDenied(AgentMeshError):
    """Valid credentials without the right to do this."""

    code = grpc.StatusCode.PERMISSION_DENIED
    default_reason = "PERMISSION_DENIED"


class _Retryable(AgentMeshError):
    def __init__(
        self,
        message: str,
        *,
        retry_after_s: float | None = None,
        reason: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message, reason=reason, metadata=metadata)
        self._retry_after_s = retry_after_s

    @property
    def retry_after_s(self) -> float | None:
        return self._retry_after_s


class ResourceExhausted(_Retryable):
    """Over a quota or shed under overload; retry after ``retry_after_s``."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED
    default_reason = "RESOURCE_EXHAUSTED"


class Unavailable(_Retryable):
    """A dependency is down or the server is draining."""

    code = grpc.StatusCode.UNAVAILABLE
    default_reason = "UNAVAILABLE"


class DeadlineExceeded(AgentMeshError):
    """The caller's deadline ran out before the work finished."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED
    default_reason = "DEADLINE_EXCEEDED"


class Cancelled(AgentMeshError):
    """The caller cancelled the work."""

    code = grpc.StatusCode.CANCELLED
    default_reason = "CANCELLED"


def to_rpc_status(error: AgentMeshError, request_id: str | None = None) -> status_pb2.Status:
    """Build the google.rpc.Status (with rich details) that represents ``error``."""
    status = status_pb2.Status(code=error.code.value[0], message=error.message)
    info = error_details_pb2.ErrorInfo(reason=error.reason, domain=DOMAIN, metadata=error.metadata)
    status.details.add().Pack(info)
    if error.field_violations:
        bad = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(field=v.field, description=v.description)
                for v in error.field_violations
            ]
        )
        status.details.add().Pack(bad)
    if error.retry_after_s is not None:
        status.details.add().Pack(error_details_pb2.RetryInfo(retry_delay=duration(error.retry_after_s)))
    if request_id:
        status.details.add().Pack(error_details_pb2.RequestInfo(request_id=request_id))
    return status


def trailing_metadata(error: AgentMeshError, request_id: str | None = None) -> tuple[tuple[str, str | bytes], ...]:
    """Trailing metadata carrying the rich status (and retry pushback) of ``error``."""
    status: grpc.Status = rpc_status.to_status(to_rpc_status(error, request_id))
    md: list[tuple[str, str | bytes]] = list(status.trailing_metadata)
    if error.retry_after_s is not None and error.code is grpc.StatusCode.RESOURCE_EXHAUSTED:
        md.append(retry_pushback(error.retry_after_s))
    return tuple(md)


def retry_pushback(retry_after_s: float) -> tuple[str, str]:
    """The ``grpc-retry-pushback-ms`` trailer that tells gRPC's own retry logic how long to wait."""
    return RETRY_PUSHBACK_KEY, str(max(0, round(retry_after_s * 1000)))


def to_request_error(error: AgentMeshError) -> common_pb2.RequestError:
    """The per-request form of ``error`` for multiplexed streams."""
    out = common_pb2.RequestError(code=error.code.value[0], message=error.message)
    for v in error.field_violations:
        out.field_violations.add(field=v.field, description=v.description)
    if error.retry_after_s is not None:
        out.retry_after.CopyFrom(duration(error.retry_after_s))
    return out
