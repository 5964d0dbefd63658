"""The router replicas behind a gateway: discovery, channels, health, and session affinity.

Routers are ``host:port`` (static) or ``dns:host:port``: the name of a
headless Service, resolved every ``refresh_s`` to one channel per router pod,
so sessions spread over every pod and a new pod gets its share (through one
ClusterIP, a gateway pod would stay pinned to one router pod over one HTTP/2
connection). A failed lookup keeps the last good set (``runtime/resolver.py``).
Each router gets one channel (gzip, shared options; Converse and unary calls),
one Relay stream for every Complete (``router_link.py``, on a channel of its
own), and a watcher that keeps its health current (``grpc.health.v1`` polled;
a failed call marks it down at once). A router that leaves the set stops getting new streams at once; its
channel is closed only after ``retire_after_s``, so the streams it carries
finish while the pod drains. ``order(key)`` lists the healthy routers by
rendezvous weight for the key: the same session goes to the same router while
that router is healthy, and the next ones are the failover order before a turn
starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gateway.router_link import RouterLink
from services.runtime.peers import PeerSet
from services.runtime.resolver import DNS_PREFIX, Lookup, Resolver, getaddrinfo_lookup

log = logging.getLogger(__name__)


class RouterPool:
    def __init__(
        self,
        targets: Sequence[str],
        channel_factory: Callable[[str], grpc.aio.Channel],
        *,
        health_interval_s: float = 1.0,
        refresh_s: float = 10.0,
        retire_after_s: float = 60.0,
        lookup: Lookup = getaddrinfo_lookup,
    ) -> None:
        self._targets = tuple(targets)
        self._channel_factory = channel_factory
        self._peers = PeerSet(
            Resolver(targets, lookup), join=self._add, leave=self._retire, refresh_s=refresh_s, what="router"
        )
        self.channels: dict[str, grpc.aio.Channel] = self._peers.peers
        self.healthy: dict[str, bool] = {}
        self._interval = health_interval_s
        self._retire_after_s = retire_after_s
        self._watchers: dict[str, asyncio.Task[None]] = {}
        self._retired: dict[str, grpc.aio.Channel] = {}
        self.links: dict[str, RouterLink] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def targets(self) -> list[str]:
        return list(self.channels)

    def start(self) -> None:
        """Watch the static routers now; resolve ``dns:`` ones at once and then every ``refresh_s``."""
        for target in self._targets:
            if not target.startswith(DNS_PREFIX):
                self._peers.join_now(target)
        if self._peers.dynamic:
            self._peers.follow(refresh_first=True)

    async def close(self) -> None:
        await self._peers.stop()
        tasks = [*self._tasks, *self._watchers.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        channels = [*self.channels.values(), *self._retired.values()]
        self.channels.clear()
        self._retired.clear()
        links = list(self.links.values())
        self.links.clear()
        await asyncio.gather(*(c.close() for c in channels), *(link.close() for link in links))

    def channel(self, target: str) -> grpc.aio.Channel:
        """The channel of ``target``, also while it is retiring (a stream may have picked it just before)."""
        return self.channels.get(target) or self._retired[target]

    def link(self, target: str) -> RouterLink:
        """The Relay stream to ``target`` (Complete requests), also while it is retiring."""
        return self.links[target]

    async def refresh(self) -> None:
        """Bring the router set in line with the targets' current addresses."""
        await self._peers.refresh()

    def _add(self, target: str) -> grpc.aio.Channel:
        channel = self._retired.pop(target, None) or self._channel_factory(target)
        if target not in self.links:
            link = self.links[target] = RouterLink(target, self._channel_factory)
            link.start()
        self.healthy[target] = False
        self._watchers[target] = asyncio.create_task(self._watch(target), name=f"router-health-{target}")
        return channel

    async def _retire(self, target: str, channel: grpc.aio.Channel) -> None:
        """No new streams at once; the channel closes after ``retire_after_s`` (its streams finish first)."""
        self._watchers.pop(target).cancel()
        self.healthy.pop(target, None)
        self._retired[target] = channel
        self._spawn(self._close_later(target), f"router-retire-{target}")

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _close_later(self, target: str) -> None:
        await asyncio.sleep(self._retire_after_s)
        channel = self._retired.pop(target, None)
        if channel is not None:
            link = self.links.pop(target, None)
            await asyncio.gather(channel.close(), *([link.close()] if link is not None else []))

    async def _watch(self, target: str) -> None:
        stub = health_pb2_grpc.HealthStub(self.channels[target])
        while True:
            try:
                reply = await stub.Check(health_pb2.HealthCheckRequest(), timeout=2.0)
                up = reply.status == health_pb2.HealthCheckResponse.SERVING
            except grpc.aio.AioRpcError:
                up = False
            if target not in self.healthy:  # left the set while the check ran
                return
            if up != self.healthy[target]:
                log.info("router %s is %s", target, "up" if up else "down")
            self.healthy[target] = up
            await asyncio.sleep(self._interval)

    def mark_down(self, target: str) -> None:
        if target in self.healthy:
            self.healthy[target] = False

    def any_healthy(self) -> bool:
        return any(self.healthy.values())

    def order(self, key: str) -> list[str]:
        """Healthy routers, best first for ``key`` (rendezvous hashing)."""

        def weight(target: str) -> bytes:
            return hashlib.sha256(f"{key}\x00{target}".encode()).digest()

        return sorted((t for t, up in self.healthy.items() if up), key=weight, reverse=True)

    async def wait_healthy(self, within_s: float) -> bool:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within_s):
                while not self.any_healthy():  # noqa: ASYNC110 - health is polled state
                    await asyncio.sleep(0.05)
        return self.any_healthy()
