"""The set of inference replicas: static addresses or DNS names, refreshed.

Targets are ``host:port`` (static) or ``dns:host:port`` (resolved every
``refresh_s``; each address becomes a replica, as for a Kubernetes headless
Service). A replica that disappears from DNS has its link closed; a new one
gets a link. Health is per link (stream up, breaker not open, not draining).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Sequence

import grpc.aio

from services.router.replica_link import ReplicaLink

log = logging.getLogger(__name__)


class ReplicaSet:
    def __init__(
        self,
        targets: Sequence[str],
        channel_factory: Callable[[str], grpc.aio.Channel],
        *,
        refresh_s: float = 10.0,
    ) -> None:
        self._targets = list(targets)
        self._channel_factory = channel_factory
        self._refresh_s = refresh_s
        self.links: dict[str, ReplicaLink] = {}
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.refresh()
        if any(t.startswith("dns:") for t in self._targets):
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
        wanted: set[str] = set()
        for target in self._targets:
            if target.startswith("dns:"):
                wanted |= await self._resolve(target.removeprefix("dns:"))
            else:
                wanted.add(target)
        for gone in set(self.links) - wanted:
            log.info("inference replica %s left the set", gone)
            await self.links.pop(gone).close()
        for new in sorted(wanted - set(self.links)):
            link = ReplicaLink(new, self._channel_factory)
            link.start()
            self.links[new] = link

    @staticmethod
    async def _resolve(host_port: str) -> set[str]:
        host, _, port = host_port.rpartition(":")
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
        except (socket.gaierror, ValueError) as exc:
            log.warning("cannot resolve %s: %s", host_port, exc)
            return set()
        out = set()
        for family, _, _, _, sockaddr in infos:
            ip = sockaddr[0]
            out.add(f"[{ip}]:{port}" if family == socket.AF_INET6 else f"{ip}:{port}")
        return out

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(self._refresh_s)
            with contextlib.suppress(Exception):
                await self.refresh()
