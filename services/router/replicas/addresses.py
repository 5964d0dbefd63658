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

from services.router.replicas.link import ReplicaLink
from services.runtime.peers import PeerSet
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
        self._channel_factory = channel_factory
        self._peers = PeerSet(
            Resolver(targets, lookup), join=self._join, leave=_leave, refresh_s=refresh_s, what="inference replica"
        )
        self.links: dict[str, ReplicaLink] = self._peers.peers

    async def start(self) -> None:
        await self.refresh()
        self._peers.follow(refresh_first=False)

    async def close(self) -> None:
        await self._peers.stop()
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
        await self._peers.refresh()

    def _join(self, address: str) -> ReplicaLink:
        link = ReplicaLink(address, self._channel_factory)
        link.start()
        return link


async def _leave(address: str, link: ReplicaLink) -> None:
    await link.close()
