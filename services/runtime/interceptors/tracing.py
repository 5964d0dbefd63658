"""Tracing: OpenTelemetry spans for every RPC, W3C trace context carried in metadata.

Why not opentelemetry-instrumentation-grpc's aio interceptors (0.66b2, checked
in tests/grpc/test_otel_instrumentation.py): its server wrapper iterates
streaming handlers with ``async for``, so handlers that answer with
``context.write`` fail (open-telemetry/opentelemetry-python-contrib#3066); its
client wrapper keeps ``write()``/``done_writing()``/``code()`` on bidi calls but
ends a streaming call's span only when the response iterator is drained, so a
cancelled stream (our links cancel as a matter of course) leaves its span open,
and it awaits a stream-unary call's status before handing the call back, so one
fed with ``write()`` hangs. Its unary-unary client wrapper works, but names
spans ``/service/method``, unlike every other span here. These two interceptors use
the same OpenTelemetry API and semantic conventions (rpc.system, rpc.service,
rpc.method, rpc.grpc.status_code) and the global W3C propagator.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any

import grpc
import grpc.aio
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from services.runtime.context import REQUEST_ID
from services.runtime.interceptors.base import CallNext, RpcInfo, RpcInterceptor, final_code

INSTRUMENTATION = "agentmesh.grpc"

#: Codes that mark a server span as failed (OpenTelemetry gRPC conventions).
SERVER_ERROR_CODES = frozenset(
    {
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)


def extract_context(carrier: Mapping[str, str]) -> otel_context.Context:
    """Parent context from a W3C carrier (metadata, or a message's trace_context map)."""
    return propagate.extract(carrier=dict(carrier))


def inject_context() -> dict[str, str]:
    """The current trace context as a W3C carrier, for metadata or a message field."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


class ServerTracingInterceptor(RpcInterceptor):
    """One SERVER span per RPC, child of the caller's span when metadata carries one."""

    skip_prefixes = ("/grpc.health.", "/grpc.reflection.")

    def __init__(self, tracer_provider: trace.TracerProvider) -> None:
        self._tracer = tracer_provider.get_tracer(INSTRUMENTATION)

    async def around(self, info: RpcInfo, context: grpc.aio.ServicerContext[Any, Any], call_next: CallNext) -> Any:
        parent = extract_context({k: v for k, v in info.metadata if isinstance(v, str)})
        attributes = {
            "rpc.system": "grpc",
            "rpc.service": info.service,
            "rpc.method": info.name,
            "agentmesh.request_id": REQUEST_ID.get(),
        }
        with server_span(self._tracer, info.method.lstrip("/"), parent, attributes) as span:
            error: BaseException | None = None
            try:
                return await call_next()
            except BaseException as exc:
                error = exc
                raise
            finally:
                set_server_status(span, final_code(context, error))


def server_span(
    tracer: trace.Tracer, name: str, parent: otel_context.Context, attributes: Mapping[str, str | int]
) -> AbstractContextManager[trace.Span]:
    """The SERVER span of one RPC (or of a request that stands for one), current while the block runs; its
    status is the caller's to set (``set_server_status``), exceptions are not recorded on it."""
    return tracer.start_as_current_span(
        name,
        context=parent,
        kind=SpanKind.SERVER,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    )


def set_server_status(span: trace.Span, code: grpc.StatusCode) -> None:
    """Record the final status on a SERVER span (OpenTelemetry gRPC conventions: some codes mark it failed)."""
    span.set_attribute("rpc.grpc.status_code", code.value[0])
    if code in SERVER_ERROR_CODES:
        span.set_status(Status(StatusCode.ERROR, code.name))


def _client_span(tracer: trace.Tracer, method: str) -> tuple[trace.Span, dict[str, str]]:
    """A CLIENT span for ``method`` ("/pkg.Service/Method") and the W3C carrier that makes it the callee's parent."""
    service, _, name = method.lstrip("/").rpartition("/")
    span = tracer.start_span(
        method.lstrip("/"),
        kind=SpanKind.CLIENT,
        attributes={"rpc.system": "grpc", "rpc.service": service, "rpc.method": name},
    )
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    return span, carrier


def end_client_span(span: trace.Span, code: grpc.StatusCode) -> None:
    """End a span from ``start_client_span`` with the call's final status."""
    span.set_attribute("rpc.grpc.status_code", code.value[0])
    if code is not grpc.StatusCode.OK:
        span.set_status(Status(StatusCode.ERROR, code.name))
    span.end()


def start_client_span(
    tracer: trace.Tracer | None, method: str, metadata: tuple[tuple[str, str], ...]
) -> tuple[trace.Span | None, tuple[tuple[str, str], ...]]:
    """The CLIENT span of a call made on a channel without the tracing interceptors, and the call's metadata
    with the span's W3C context added; ``(None, metadata)`` without a tracer.

    For hot paths (the gateway's relay to its routers): the interceptors wrap every call in an intercepted
    call object (a task per call, one more async step per streamed message) and end the span from a task;
    here the caller ends it with ``end_client_span`` when it knows the status.
    """
    if tracer is None:
        return None, metadata
    span, carrier = _client_span(tracer, method)
    return span, (*metadata, *carrier.items())


class _ClientTracing:
    def __init__(self, tracer_provider: trace.TracerProvider) -> None:
        self._tracer = tracer_provider.get_tracer(INSTRUMENTATION)
        self._finishing: set[asyncio.Task[None]] = set()

    def _start(self, details: grpc.aio.ClientCallDetails) -> tuple[trace.Span, grpc.aio.ClientCallDetails]:
        method = details.method.decode() if isinstance(details.method, bytes) else str(details.method)
        span, carrier = _client_span(self._tracer, method)
        metadata = grpc.aio.Metadata(*tuple(details.metadata or ()))
        for key, value in carrier.items():
            metadata[key] = value
        new = grpc.aio.ClientCallDetails(
            details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
        )
        return span, new

    def _finish_when_done(self, span: trace.Span, call: grpc.aio.Call) -> None:
        async def finish() -> None:
            try:
                code = await call.code()
            except BaseException:  # the loop is closing; end the span anyway
                code = grpc.StatusCode.CANCELLED
            end_client_span(span, code)

        def on_done(_: object) -> None:
            task = asyncio.ensure_future(finish())
            self._finishing.add(task)
            task.add_done_callback(self._finishing.discard)

        call.add_done_callback(on_done)

    async def _intercept(
        self, continuation: Callable[..., Awaitable[Any]], details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        span, new_details = self._start(details)
        try:
            call = await continuation(new_details, request)
        except BaseException:
            span.set_status(Status(StatusCode.ERROR))
            span.end()
            raise
        self._finish_when_done(span, call)
        return call


class UnaryUnaryTracing(_ClientTracing, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await self._intercept(continuation, client_call_details, request)


class UnaryStreamTracing(_ClientTracing, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await self._intercept(continuation, client_call_details, request)


class StreamUnaryTracing(_ClientTracing, grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(self, continuation: Any, client_call_details: Any, request_iterator: Any) -> Any:
        return await self._intercept(continuation, client_call_details, request_iterator)


class StreamStreamTracing(_ClientTracing, grpc.aio.StreamStreamClientInterceptor):
    async def intercept_stream_stream(self, continuation: Any, client_call_details: Any, request_iterator: Any) -> Any:
        return await self._intercept(continuation, client_call_details, request_iterator)


def client_tracing_interceptors(tracer_provider: trace.TracerProvider) -> list[grpc.aio.ClientInterceptor]:
    """CLIENT spans for all four call kinds, injecting W3C context into metadata."""
    return [
        UnaryUnaryTracing(tracer_provider),
        UnaryStreamTracing(tracer_provider),
        StreamUnaryTracing(tracer_provider),
        StreamStreamTracing(tracer_provider),
    ]
