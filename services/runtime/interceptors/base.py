"""A streaming-aware base for grpc.aio server interceptors.

grpc.aio hands an interceptor a method handler whose behaviour is either a
coroutine (unary responses, or streaming handlers that call ``context.write``)
or an async generator (streaming handlers that ``yield``). Wrapping only the
``await`` misses the second kind. Here every behaviour is first normalised to
a coroutine (an async generator is drained into ``context.write``), so each
interceptor writes one ``around()`` that sees the whole RPC, streaming or not,
from first byte to final status.
"""

from __future__ import annotations

import abc
import contextlib
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

import grpc
import grpc.aio

Behavior = Callable[[Any, grpc.aio.ServicerContext[Any, Any]], Any]
CallNext = Callable[[], Awaitable[Any]]


@dataclass(frozen=True)
class RpcInfo:
    """What an interceptor knows about the RPC it wraps."""

    method: str  # "/pkg.Service/Method"
    service: str
    name: str
    kind: str  # unary_unary | unary_stream | stream_unary | stream_stream
    metadata: tuple[tuple[str, str | bytes], ...]

    @classmethod
    def of(cls, details: grpc.HandlerCallDetails, handler: grpc.RpcMethodHandler[Any, Any]) -> RpcInfo:
        method: str = details.method
        service, _, name = method.lstrip("/").rpartition("/")
        sides = (
            "stream" if handler.request_streaming else "unary",
            "stream" if handler.response_streaming else "unary",
        )
        kind = "_".join(sides)
        md = tuple((str(k), v) for k, v in (details.invocation_metadata or ()))
        return cls(method=method, service=service, name=name, kind=kind, metadata=md)

    def header(self, key: str) -> str | None:
        """The first text value of metadata ``key``, if present."""
        for k, v in self.metadata:
            if k == key and isinstance(v, str):
                return v
        return None


def as_coroutine(behavior: Behavior) -> Behavior:
    """Normalise a handler behaviour to a coroutine function (see module docstring)."""

    async def run(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        result = behavior(request, context)
        if inspect.isasyncgen(result):
            async with contextlib.aclosing(result):  # closed in this task even when a write is cancelled
                async for message in result:
                    await context.write(message)
            return None
        return await result

    return run


def rewrap(
    handler: grpc.RpcMethodHandler[Any, Any], wrap: Callable[[Behavior], Behavior]
) -> grpc.RpcMethodHandler[Any, Any]:
    """A copy of ``handler`` whose behaviour is ``wrap(normalised behaviour)``."""
    behavior: Any = handler.stream_stream or handler.stream_unary or handler.unary_stream or handler.unary_unary
    wrapped = wrap(as_coroutine(behavior))
    kw = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(wrapped, **kw)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(wrapped, **kw)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(wrapped, **kw)
    return grpc.unary_unary_rpc_method_handler(wrapped, **kw)


class RpcInterceptor(abc.ABC):
    """One concern wrapped around every RPC (all four kinds) in ``around()``; a server runs its concerns as one
    ``InterceptorChain``, the grpc.aio interceptor."""

    #: Methods whose full name starts with one of these are not intercepted.
    skip_prefixes: tuple[str, ...] = ()

    @abc.abstractmethod
    async def around(self, info: RpcInfo, context: grpc.aio.ServicerContext[Any, Any], call_next: CallNext) -> Any:
        """Run ``call_next()`` (the rest of the chain and the handler) with this concern around it."""


class InterceptorChain(grpc.aio.ServerInterceptor):
    """Several ``RpcInterceptor``s as one grpc.aio interceptor, outermost first.

    Why one: grpc.aio runs each registered interceptor's ``intercept_service``
    per call, and each rebuilt the method handler and read the metadata again
    (six concerns: six handlers, six metadata tuples, six wrapper layers per
    call, ≈ 200 µs per call per hop; BENCHMARKS.md, relay). The chain looks the
    handler up once, reads ``RpcInfo`` once, wraps once, and runs the
    ``around``s nested in order; which concerns apply to a method (their
    ``skip_prefixes``) is worked out once per method.
    """

    def __init__(self, interceptors: list[RpcInterceptor]) -> None:
        self.interceptors = tuple(interceptors)
        self._for_method: dict[str, tuple[RpcInterceptor, ...]] = {}

    def _active(self, method: str) -> tuple[RpcInterceptor, ...]:
        found = self._for_method.get(method)
        if found is None:
            found = tuple(i for i in self.interceptors if not method.startswith(i.skip_prefixes))
            if len(self._for_method) < 1024:  # unknown methods never reach here; bound it anyway
                self._for_method[method] = found
        return found

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        if handler is None:  # unknown method: grpc answers UNIMPLEMENTED
            return handler
        active = self._active(handler_call_details.method)
        if not active:
            return handler
        info = RpcInfo.of(handler_call_details, handler)
        last = len(active)

        def wrap(behavior: Behavior) -> Behavior:
            async def intercepted(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
                def step(i: int) -> Awaitable[Any]:
                    if i == last:
                        return cast("Awaitable[Any]", behavior(request, context))
                    return active[i].around(info, context, lambda: step(i + 1))

                return await step(0)

            return intercepted

        return rewrap(handler, wrap)


def final_code(context: grpc.aio.ServicerContext[Any, Any], error: BaseException | None) -> grpc.StatusCode:
    """The status an RPC ended with, as far as the server knows."""
    if error is None:
        code = context.code()
        return code if isinstance(code, grpc.StatusCode) else grpc.StatusCode.OK
    if isinstance(error, grpc.aio.AbortError):
        code = context.code()
        return code if isinstance(code, grpc.StatusCode) else grpc.StatusCode.UNKNOWN
    if isinstance(error, BaseException) and type(error).__name__ == "CancelledError":
        return grpc.StatusCode.CANCELLED
    return grpc.StatusCode.UNKNOWN
