"""The error taxonomy round-trips through rich status details."""

from __future__ import annotations

from collections.abc import Sequence

import grpc
import grpc.aio
import pytest

from services.runtime.errors import (
    STATUS_DETAILS_KEY,
    FieldViolation,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    Unavailable,
    to_request_error,
    to_rpc_status,
    trailing_metadata,
)
from services.runtime.status_decode import RichError, code_from_number, rich_error_of


def failed_call(code: grpc.StatusCode, details: str, trailing: Sequence[tuple[str, str | bytes]]) -> RichError:
    """What a client decodes from a call that ended with this status and these trailers."""
    return rich_error_of(grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(*trailing), details))


def test_invalid_argument_round_trip() -> None:
    exc = InvalidArgument.field("submit.sampling.max_tokens", "must be at most 512", reason="MAX_TOKENS")
    rich = failed_call(exc.code, exc.message, trailing_metadata(exc, "rid-1"))
    assert rich.code is grpc.StatusCode.INVALID_ARGUMENT
    assert rich.message == "submit.sampling.max_tokens: must be at most 512"
    assert rich.reason == "MAX_TOKENS" and rich.request_id == "rid-1"
    assert rich.field_violations == (FieldViolation("submit.sampling.max_tokens", "must be at most 512"),)


def test_resource_exhausted_carries_retry_info_and_pushback() -> None:
    exc = ResourceExhausted("slow down", retry_after_s=0.25)
    md = dict(trailing_metadata(exc))
    assert md["grpc-retry-pushback-ms"] == "250"
    assert failed_call(exc.code, exc.message, tuple(md.items())).retry_after_s == pytest.approx(0.25)
    assert "grpc-retry-pushback-ms" not in dict(trailing_metadata(Unavailable("down", retry_after_s=1)))


def test_request_error_form() -> None:
    err = to_request_error(InvalidArgument.field("prompt", "is empty"))
    assert code_from_number(err.code) is grpc.StatusCode.INVALID_ARGUMENT
    assert [(v.field, v.description) for v in err.field_violations] == [("prompt", "is empty")]
    assert code_from_number(to_request_error(NotFound("x")).code) is grpc.StatusCode.NOT_FOUND


def test_plain_status_without_details() -> None:
    rich = failed_call(grpc.StatusCode.UNAVAILABLE, "gone", ())
    assert rich.message == "gone" and rich.reason == "" and rich.field_violations == ()


def test_details_that_contradict_the_status_are_ignored() -> None:
    forged = to_rpc_status(ResourceExhausted("slow down", retry_after_s=60)).SerializeToString()
    rich = failed_call(grpc.StatusCode.UNAVAILABLE, "gone", ((STATUS_DETAILS_KEY, forged),))
    assert rich == RichError(code=grpc.StatusCode.UNAVAILABLE, message="gone")
