"""The one service lifecycle: build → listen → warm up → serve → drain → close (uvicorn's ``Server.serve``).

Every mesh process runs the same phases; a service supplies only a builder
(``Build``) that makes its parts and says what differs (``Parts``):

1. Start-up. Signal handlers first, so a SIGTERM that arrives while the service
   is still starting is not lost; tracing and metrics; the builder (which may
   connect to Redis, load keys, build an engine) and registers what to close on
   the ``Kit``; the gRPC server binds (health NOT_SERVING, so probes get an
   answer during warm-up) with ``/metrics`` beside it, and starts.
2. Warm-up. ``Parts.warm_up(server)`` raced against the stop signal: an engine
   that loads for a minute can still be stopped. Then health is SERVING, or
   follows ``Parts.ready()`` for a service that is only as good as a
   dependency; ``Parts.watch(server)`` runs beside it (e.g. an engine watchdog).
3. Serve until SIGTERM or SIGINT.
4. Shutdown. Watchers stop; ``Parts.announce_draining`` tells open streams;
   ``MeshServer.drain`` gives in-flight RPCs the grace while listeners
   registered with ``Kit.drain_with_server`` (the gateway's HTTP edge) close
   alongside; an unfinished warm-up is cancelled; then resources close in the
   reverse order of their opening.

A ``StartupError`` from phases 1–2 ends the process with one line and exit 1
(``launch.run_service``); a started server stops at once and what was opened
by then is still closed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from services.runtime.config import ServiceConfig
from services.runtime.interceptors.base import RpcInterceptor
from services.runtime.metrics import Metrics, MetricsServer
from services.runtime.server import DrainHook, MeshServer, Service, stop_signals
from services.runtime.telemetry import tracing_for
from services.runtime.tls import MeshTls

C = TypeVar("C", bound=ServiceConfig)

Closer = Callable[[], Awaitable[Any]]
Phase = Callable[[MeshServer], Coroutine[Any, Any, None]]


class Kit:
    """What the lifecycle lends a builder: the process's metrics and tracing, and where to register closers.

    Closers registered with ``close_after_drain`` run after the server has
    drained, last registered first (a client opened after Redis closes before
    it). ``drain_with_server`` is for a second listener whose requests call this
    server: it stops while the server drains, so both get the same grace.
    """

    def __init__(self, metrics: Metrics, tracer_provider: TracerProvider, resources: contextlib.AsyncExitStack) -> None:
        self.metrics = metrics
        self.tracer_provider = tracer_provider
        self._resources = resources
        self._with_drain: list[Closer] = []

    def close_after_drain(self, close: Closer) -> None:
        self._resources.push_async_callback(close)

    def drain_with_server(self, close: Closer) -> None:
        self._with_drain.append(close)

    async def drain(self, server: MeshServer) -> None:
        await asyncio.gather(server.drain(), *(close() for close in self._with_drain))


@dataclass(frozen=True)
class Parts:
    """What one service serves and how it becomes ready; everything else is the lifecycle's.

    ``tls``: mutual TLS on the service port (None: plaintext, the gateway's
    public port). ``warm_up``: runs once the server listens, before SERVING.
    ``ready``: health follows it (None: SERVING once warm). ``watch``: runs
    while serving, until drain. ``metrics_also``: registries exported beside
    ours on ``/metrics`` (vLLM's global one).
    """

    services: Sequence[Service]
    interceptors: Sequence[RpcInterceptor] = ()
    tls: MeshTls | None = None
    warm_up: Phase | None = None
    ready: Callable[[], bool] | None = None
    watch: Phase | None = None
    announce_draining: DrainHook | None = None
    metrics_also: Sequence[CollectorRegistry] = ()


Build = Callable[[C, Kit], Awaitable[Parts]]


async def serve(config: C, build: Build[C], *, tracer_provider: TracerProvider | None = None) -> None:
    """Run one service from start-up to its last closed resource (see the module docstring).

    ``tracer_provider``: None sets up the configured exporter, process-wide; tests pass their own.
    """
    stop = stop_signals()
    async with contextlib.AsyncExitStack() as resources:
        kit = Kit(Metrics(), tracer_provider or tracing_for(config), resources)
        parts = await build(config, kit)
        server = MeshServer(
            config,
            parts.services,
            metrics=kit.metrics,
            tracer_provider=kit.tracer_provider,
            interceptors=parts.interceptors,
            tls=parts.tls,
        )
        if config.metrics_port >= 0:
            metrics_server = MetricsServer(kit.metrics, config.host, config.metrics_port, also=parts.metrics_also)
            resources.callback(metrics_server.close)
        await server.start(serving=False)
        # A warm-up that fails stops the server at once; after a drain this is a no-op.
        resources.push_async_callback(server.drain, 0)
        await _serve_until_stopped(server, parts, kit, stop)


async def _serve_until_stopped(server: MeshServer, parts: Parts, kit: Kit, stop: asyncio.Future[Any]) -> None:
    """Phases 2–4 on a started server; returns once it has drained."""
    warming: asyncio.Future[None] | None = None
    if parts.warm_up is not None:
        warming = asyncio.ensure_future(parts.warm_up(server))
        await asyncio.wait([stop, warming], return_when=asyncio.FIRST_COMPLETED)
    watchers: list[asyncio.Task[None]] = []
    if warming is None or warming.done():
        if warming is not None:
            warming.result()  # a failed warm-up ends start-up here
        if parts.ready is not None:
            watchers.append(asyncio.create_task(server.follow(parts.ready)))
        else:
            await server.set_serving(True)
        if parts.watch is not None:
            watchers.append(asyncio.create_task(parts.watch(server)))
        await stop
    for watcher in watchers:
        watcher.cancel()
    if parts.announce_draining is not None:
        server.on_drain(parts.announce_draining)
    await kit.drain(server)
    if warming is not None and not warming.done():
        warming.cancel()
        await asyncio.gather(warming, return_exceptions=True)
