"""The server factory: a grpc.aio server with everything a mesh service needs.

``MeshServer`` wires gzip responses, agreed keepalive and message-size options,
``maximum_concurrent_rpcs``, the interceptor chain (request id → tracing →
metrics → deadline → errors), standard ``grpc.health.v1`` (NOT_SERVING until
the service says it is warm) and reflection. ``drain()`` is the graceful stop:
health flips to NOT_SERVING, drain hooks tell open streams, then
``server.stop(grace)`` refuses new RPCs while in-flight ones finish.

With ``tls`` (``tls.MeshTls``) the port takes only mutually authenticated mesh
peers; ``--health-port`` then serves the same health in plaintext, alone, for
probes that cannot present a certificate.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import grpc
import grpc.aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from opentelemetry import trace

from services.runtime.config import ServiceConfig
from services.runtime.interceptors.base import InterceptorChain, RpcInterceptor
from services.runtime.interceptors.deadline import DeadlineInterceptor
from services.runtime.interceptors.errors import ErrorInterceptor
from services.runtime.interceptors.metrics import MetricsInterceptor
from services.runtime.interceptors.request_id import RequestIdInterceptor
from services.runtime.interceptors.tracing import ServerTracingInterceptor
from services.runtime.metrics import Metrics
from services.runtime.options import server_options
from services.runtime.tls import MeshTls

log = logging.getLogger(__name__)

DrainHook = Callable[[], Awaitable[None]]

#: Health name for liveness probes (see ``MeshServer.start``).
LIVENESS = "liveness"


class StartupError(Exception):
    """The server cannot start (port taken, dependency unreachable); one line for the user."""


@dataclass(frozen=True)
class Service:
    """A servicer to serve: its full proto name and how to add it to a server."""

    name: str
    register: Callable[[grpc.aio.Server], None]


def _check_bindable(host: str, port: int) -> None:
    """Fail with the OS's reason before gRPC core logs its own multi-line bind error."""
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As gRPC binds: a restart on the same port must not trip over the last run's TIME_WAIT
        # connections (after a graceful drain), while a live listener still refuses the bind.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise StartupError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def _listen(server: grpc.aio.Server, host: str, port: int, tls: MeshTls | None) -> int:
    """Bind ``host:port`` (mutual TLS when ``tls``); the bound port, or StartupError."""
    _check_bindable(host, port)
    address = f"{host}:{port}"
    try:
        bound = server.add_secure_port(address, tls.server_credentials()) if tls else server.add_insecure_port(address)
    except RuntimeError as exc:
        raise StartupError(f"cannot listen on {address}: {exc}") from None
    if bound == 0:
        raise StartupError(f"cannot listen on {address} (address in use?)")
    return bound


class MeshServer:
    """One grpc.aio server of the mesh (see module docstring)."""

    def __init__(
        self,
        config: ServiceConfig,
        services: Sequence[Service],
        *,
        metrics: Metrics,
        tracer_provider: trace.TracerProvider | None = None,
        interceptors: Sequence[RpcInterceptor] = (),
        compression: grpc.Compression = grpc.Compression.Gzip,
        tls: MeshTls | None = None,
    ) -> None:
        """``compression`` is the default for responses (benchmarks switch it off to measure both ways)."""
        chain: list[RpcInterceptor] = [RequestIdInterceptor()]
        if tracer_provider is not None:
            chain.append(ServerTracingInterceptor(tracer_provider))
        chain += [MetricsInterceptor(metrics), *interceptors, DeadlineInterceptor(), ErrorInterceptor()]
        self.config = config
        self.metrics = metrics
        self._server = grpc.aio.server(
            interceptors=[InterceptorChain(chain)],
            options=server_options(config.max_message_bytes),
            maximum_concurrent_rpcs=config.max_concurrent_rpcs,
            compression=compression,
        )
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self._server)
        for service in services:
            service.register(self._server)
        self.service_names = tuple(s.name for s in services)
        reflection.enable_server_reflection(
            (*self.service_names, health.SERVICE_NAME, reflection.SERVICE_NAME), self._server
        )
        self.port = _listen(self._server, config.host, config.port, tls)
        self._health_server: grpc.aio.Server | None = None
        self.health_port = -1
        if config.health_port >= 0:
            self._health_server = grpc.aio.server(options=server_options(config.max_message_bytes))
            health_pb2_grpc.add_HealthServicer_to_server(self.health, self._health_server)
            self.health_port = _listen(self._health_server, config.host, config.health_port, None)
        self._drain_hooks: list[DrainHook] = []
        self._draining = False

    @property
    def address(self) -> str:
        return f"{self.config.host}:{self.port}"

    @property
    def draining(self) -> bool:
        return self._draining

    async def start(self, *, serving: bool = True) -> None:
        """Start accepting RPCs; health says SERVING only if ``serving`` (else after warm-up).

        The ``liveness`` health name is SERVING from here on, whatever the dependencies do: a
        liveness probe must restart a wedged process, not one whose dependency is down.
        """
        await self._server.start()
        if self._health_server is not None:
            await self._health_server.start()
        await self.health.set(LIVENESS, health_pb2.HealthCheckResponse.SERVING)
        await self.set_serving(serving)
        log.info("serving %s on %s", ", ".join(self.service_names), self.address)

    async def set_serving(self, serving: bool) -> None:
        """Set health of the server ("") and of every service it serves."""
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in ("", *self.service_names):
            await self.health.set(name, status)

    async def follow(self, is_up: Callable[[], bool], interval_s: float = 0.5) -> None:
        """Keep health in step with ``is_up()`` (e.g. "some dependency is reachable") until cancelled."""
        serving: bool | None = None
        while not self._draining:
            now = is_up()
            if now != serving:
                await self.set_serving(now)
                serving = now
            await asyncio.sleep(interval_s)

    def on_drain(self, hook: DrainHook) -> None:
        """Run ``hook`` when draining starts (e.g. send drain notices on open streams)."""
        self._drain_hooks.append(hook)

    async def drain(self, grace: float | None = None) -> None:
        """Graceful stop: NOT_SERVING, drain hooks (listening meanwhile), then stop with what is left of the grace.

        Safe to call twice."""
        if self._draining:
            return
        self._draining = True
        grace = self.config.drain_grace_s if grace is None else grace
        log.info("draining %s (grace %.1fs)", self.address, grace)
        await self.set_serving(False)
        loop = asyncio.get_running_loop()
        began = loop.time()
        hooks = asyncio.gather(*(hook() for hook in self._drain_hooks), return_exceptions=True)
        try:
            # A hook may wait for its streams to finish while the server still listens (``OpenStreams``).
            results = await asyncio.wait_for(hooks, grace)
        except TimeoutError:
            results = []
        for result in results:
            if isinstance(result, BaseException):
                log.warning("drain hook failed: %r", result)
        await self._server.stop(max(0.0, grace - (loop.time() - began)))
        if self._health_server is not None:
            await self._health_server.stop(0)

    async def wait_for_termination(self) -> None:
        await self._server.wait_for_termination()


def stop_signals(
    signals: Sequence[signal.Signals] = (signal.SIGTERM, signal.SIGINT),
) -> asyncio.Future[signal.Signals]:
    """A future resolved by the first of ``signals`` (the uvicorn way: signal → event).

    Handlers are installed before this returns, so a signal that arrives while
    the service is still starting is not lost. Call it first thing in ``serve``.
    """
    loop = asyncio.get_running_loop()
    received: asyncio.Future[signal.Signals] = loop.create_future()

    def on_signal(sig: signal.Signals) -> None:
        if not received.done():
            received.set_result(sig)

    for sig in signals:
        loop.add_signal_handler(sig, on_signal, sig)

    def restore(_: object) -> None:
        for sig in signals:
            loop.remove_signal_handler(sig)

    received.add_done_callback(restore)
    return received
