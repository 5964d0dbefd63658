"""The router replicas behind a gateway: channels, health, and session affinity.

Each router gets one channel (gzip, shared options) and a watcher that keeps
its health current (``grpc.health.v1`` polled; a failed call marks it down at
once). ``order(key)`` lists the healthy routers by rendezvous weight for the
key: the same session goes to the same router while that router is healthy,
and the next ones are the failover order before a turn starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Callable, Sequence

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

log = logging.getLogger(__name__)


class RouterPool:
    def __init__(
        self,
        targets: Sequence[str],
        channel_factory: Callable[[str], grpc.aio.Channel],
        *,
        health_interval_s: float = 1.0,
    ) -> None:
        self.targets = list(targets)
        self.channels = {t: channel_factory(t) for t in self.targets}
        self.healthy: dict[str, bool] = dict.fromkeys(self.targets, False)
        self._interval = health_interval_s
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._watch(t), name=f"router-health-{t}") for t in self.targets]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(c.close() for c in self.channels.values()))

    async def _watch(self, target: str) -> None:
        stub = health_pb2_grpc.HealthStub(self.channels[target])
        while True:
            try:
                reply = await stub.Check(health_pb2.HealthCheckRequest(), timeout=2.0)
                up = reply.status == health_pb2.HealthCheckResponse.SERVING
            except grpc.aio.AioRpcError:
                up = False
            if up != self.healthy[target]:
                log.info("router %s is %s", target, "up" if up else "down")
            self.healthy[target] = up
            await asyncio.sleep(self._interval)

    def mark_down(self, target: str) -> None:
        self.healthy[target] = False

    def any_healthy(self) -> bool:
        return any(self.healthy.values())

    def order(self, key: str) -> list[str]:
        """Healthy routers, best first for ``key`` (rendezvous hashing)."""

        def weight(target: str) -> bytes:
            return hashlib.sha256(f"{key}\x00{target}".encode()).digest()

        return sorted((t for t in self.targets if self.healthy[t]), key=weight, reverse=True)

    async def wait_healthy(self, within_s: float) -> bool:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within_s):
                while not self.any_healthy():  # noqa: ASYNC110 - health is polled state
                    await asyncio.sleep(0.05)
        return self.any_healthy()
