"""What opentelemetry-instrumentation-grpc's aio interceptors do with our call patterns, beside our own.

These pin down why services/runtime/interceptors/tracing.py is our own code (see
the README): the package's aio client keeps ``write()``/``done_writing()``/
``code()`` on bidi calls, but leaves client spans open when a stream is
cancelled and hangs stream-unary calls fed with ``write()``; its aio server
wrapper fails handlers that answer with ``context.write``
(open-telemetry/opentelemetry-python-contrib#3066). If a release fixes these,
these tests fail and the package should replace our interceptors.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc
import grpc.aio
import pytest
from opentelemetry.instrumentation.grpc import aio_client_interceptors, aio_server_interceptor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from services.runtime.interceptors.tracing import client_tracing_interceptors


class Probe:
    """Raw-bytes handlers, one per call pattern; ``cancelled`` is set when a waiting stream is cancelled."""

    def __init__(self) -> None:
        self.cancelled = asyncio.Event()

    async def chat(self, requests: AsyncIterator[bytes], _: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[bytes]:
        async for request in requests:
            yield request

    async def upload(self, requests: AsyncIterator[bytes], _: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        return b"%d" % len([r async for r in requests])

    async def wait(self, _: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        await context.write(b"first")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise

    async def pushed(self, _: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        await context.write(b"one")
        await context.write(b"two")

    def handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(
            "probe.Probe",
            {
                "Chat": grpc.stream_stream_rpc_method_handler(self.chat),
                "Upload": grpc.stream_unary_rpc_method_handler(self.upload),
                "Wait": grpc.unary_stream_rpc_method_handler(self.wait),
                "Pushed": grpc.unary_stream_rpc_method_handler(self.pushed),
            },
        )


@pytest.fixture
async def probe_server() -> AsyncIterator[tuple[Probe, Any]]:
    """Start a plain grpc.aio server; the test adds interceptors by calling the yielded factory."""
    servers: list[grpc.aio.Server] = []
    probe = Probe()

    async def start(interceptors: Sequence[grpc.aio.ServerInterceptor] = ()) -> str:
        server = grpc.aio.server(interceptors=interceptors)
        server.add_generic_rpc_handlers((probe.handler(),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        servers.append(server)
        return f"127.0.0.1:{port}"

    yield probe, start
    for server in servers:
        await server.stop(0)


def package_client(provider: TracerProvider) -> list[grpc.aio.ClientInterceptor]:
    """The package's aio client interceptors (it ships without type hints)."""
    interceptors: list[grpc.aio.ClientInterceptor] = aio_client_interceptors(provider)  # type: ignore[no-untyped-call]
    return interceptors


def package_server(provider: TracerProvider) -> grpc.aio.ServerInterceptor:
    """The package's aio server interceptor."""
    interceptor: grpc.aio.ServerInterceptor = aio_server_interceptor(provider)  # type: ignore[no-untyped-call]
    return interceptor


def client_spans(exporter: InMemorySpanExporter) -> list[str]:
    return [s.name for s in exporter.get_finished_spans() if s.kind is SpanKind.CLIENT]


async def test_package_client_keeps_write_and_code_on_bidi_calls(
    probe_server: tuple[Probe, Any], tracer_provider: TracerProvider
) -> None:
    _, start = probe_server
    async with grpc.aio.insecure_channel(await start(), interceptors=package_client(tracer_provider)) as channel:
        call: Any = channel.stream_stream("/probe.Probe/Chat")()
        await call.write(b"ping")
        assert await call.read() == b"ping"
        await call.done_writing()
        assert await call.read() is grpc.aio.EOF
        assert await call.code() is grpc.StatusCode.OK


@pytest.mark.parametrize("package", [True, False], ids=["package", "ours"])
async def test_a_cancelled_stream_ends_its_client_span_only_with_ours(
    probe_server: tuple[Probe, Any],
    tracer_provider: TracerProvider,
    span_exporter: InMemorySpanExporter,
    package: bool,
) -> None:
    probe, start = probe_server
    tracing = package_client(tracer_provider) if package else client_tracing_interceptors(tracer_provider)
    async with grpc.aio.insecure_channel(await start(), interceptors=tracing) as channel:
        wait: Any = channel.unary_stream("/probe.Probe/Wait")
        call = wait(b"")
        assert await call.read() == b"first"
        call.cancel()
        await asyncio.wait_for(probe.cancelled.wait(), 5)
        for _ in range(50):  # ours ends the span from a done-callback task
            if client_spans(span_exporter):
                break
            await asyncio.sleep(0.02)
        assert client_spans(span_exporter) == ([] if package else ["probe.Probe/Wait"])
        del call


@pytest.mark.parametrize("package", [True, False], ids=["package", "ours"])
async def test_stream_unary_calls_fed_with_write_hang_only_with_the_package(
    probe_server: tuple[Probe, Any], tracer_provider: TracerProvider, package: bool
) -> None:
    _, start = probe_server
    tracing = package_client(tracer_provider) if package else client_tracing_interceptors(tracer_provider)
    async with grpc.aio.insecure_channel(await start(), interceptors=tracing) as channel:
        call: Any = channel.stream_unary("/probe.Probe/Upload")(timeout=10)
        if package:
            # Its interceptor awaits the call's status before handing the call over, and the
            # status waits for the requests that write() would send.
            write = asyncio.ensure_future(call.write(b"a"))
            done, _ = await asyncio.wait({write}, timeout=2)
            assert not done, "the package's stream-unary wrapper no longer blocks write()"
            call.cancel()
            with pytest.raises((asyncio.CancelledError, asyncio.InvalidStateError)):
                await write
            return
        await call.write(b"a")
        await call.write(b"b")
        await call.done_writing()
        assert await call == b"2"


@pytest.mark.filterwarnings("ignore:coroutine 'Probe.pushed' was never awaited:RuntimeWarning")
@pytest.mark.parametrize("package", [True, False], ids=["package", "plain"])
async def test_context_write_handlers_fail_under_the_package_server_wrapper(
    probe_server: tuple[Probe, Any], tracer_provider: TracerProvider, package: bool
) -> None:
    _, start = probe_server
    address = await start([package_server(tracer_provider)] if package else [])
    async with grpc.aio.insecure_channel(address) as channel:
        pushed: Any = channel.unary_stream("/probe.Probe/Pushed")
        call = pushed(b"")
        if package:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                _ = [m async for m in call]
            assert err.value.code() is grpc.StatusCode.UNKNOWN
            return
        assert [m async for m in call] == [b"one", b"two"]
