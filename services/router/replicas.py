"""The set of inference replicas: static addresses or DNS names, refreshed.

Targets are ``host:port`` (static) or ``dns:host:port`` (resolved every
``refresh_s``; each address becomes a replica, as for a Kubernetes headless
Service). A replica that disappears from DNS has its link closed; a new one
gets a link. A failed lookup keeps the last good set (``runtime/resolver.py``),
so a DNS hiccup never closes the links that carry generations in flight.
Health is per link (stream up, breaker not open, not draining).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

import grpc.aio

from services.router.replica_link import ReplicaLink
from services.runtime.resolver import Lookup, Resolver, getaddrinfo_lookup

log = logging.getLogger(__name__)


class ReplicaSet:
    def __init__(
        self,
        targets: Sequence[str],
        channel_factory: Callable[[str], grpc.aio.Channel],
        *,
        refresh_s: float = 10.0,
        lookup: Lookup = getaddrinfo_lookup,
    ) -> None:
        self._resolver = Resolver(targets, lookup)
        self._channel_factory = channel_factory
        self._refresh_s = refresh_s
        self.links: dict[str, ReplicaLink] = {}
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.refresh()
        if self._resolver.dynamic:
            self._task = asyncio.create_task(self._refresh_loop(), name="replica-dns-refresh")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await asyncio.gather(*(link.close() for link in self.links.values()))

    @property
    def replicas(self) -> list[ReplicaLink]:
        return list(self.links.values())

    async def wait_any(self, within_s: float) -> bool:
        """True once at least one replica is connected."""
        if not self.links:
            return False
        waits = [asyncio.ensure_future(link.wait_connected(within_s)) for link in self.links.values()]
        for fut in asyncio.as_completed(waits):
            if await fut:
                for w in waits:
                    w.cancel()
                return True
        return False

    async def refresh(self) -> None:
        wanted = await self._resolver.resolve()
        for gone in set(self.links) - wanted:
            log.info("inference replica %s left the set", gone)
            await self.links.pop(gone).close()
        for new in sorted(wanted - set(self.links)):
            link = ReplicaLink(new, self._channel_factory)
            link.start()
            self.links[new] = link

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(self._refresh_s)
            try:
                await self.refresh()
            except Exception:  # the loop must outlive one bad refresh; the set stays as it was
                log.exception("refreshing the inference replicas failed")
