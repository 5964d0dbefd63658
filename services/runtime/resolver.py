"""The addresses behind a client's targets: ``host:port`` as given, ``dns:host:port`` resolved to every record.

A ``dns:`` name is resolved to all its A/AAAA records, so a client of a
Kubernetes headless Service sees every ready pod and can spread over them
(the router over inference replicas and tool executors, the gateway over
routers), and re-resolving picks up pods the autoscaler adds. A lookup that
fails or comes back empty keeps that name's last good set, with a warning:
dropping every address on a kube-dns hiccup would close every link and abort
the work in flight on it. A name that never resolved contributes nothing.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable, Sequence

log = logging.getLogger(__name__)

#: ``(host, port)`` → ``(family, ip)`` pairs; raises OSError when the name cannot be resolved.
Lookup = Callable[[str, int], Awaitable[list[tuple[int, str]]]]

DNS_PREFIX = "dns:"


async def getaddrinfo_lookup(host: str, port: int) -> list[tuple[int, str]]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [(family, str(sockaddr[0])) for family, _, _, _, sockaddr in infos]


def is_dynamic(targets: Sequence[str]) -> bool:
    """Whether any target needs re-resolving."""
    return any(t.startswith(DNS_PREFIX) for t in targets)


class Resolver:
    """Turns targets into the current set of ``host:port`` addresses (see module docstring)."""

    def __init__(self, targets: Sequence[str], lookup: Lookup = getaddrinfo_lookup) -> None:
        self.targets = list(targets)
        self._lookup = lookup
        self._last_good: dict[str, set[str]] = {}

    @property
    def dynamic(self) -> bool:
        return is_dynamic(self.targets)

    async def resolve(self) -> set[str]:
        out: set[str] = set()
        for target in self.targets:
            if target.startswith(DNS_PREFIX):
                out |= await self._resolve_name(target.removeprefix(DNS_PREFIX))
            else:
                out.add(target)
        return out

    async def _resolve_name(self, host_port: str) -> set[str]:
        host, _, port = host_port.rpartition(":")
        try:
            records = await self._lookup(host, int(port))
        except (OSError, ValueError) as exc:
            return self._keep(host_port, f"lookup failed: {exc}")
        found = {f"[{ip}]:{port}" if family == socket.AF_INET6 else f"{ip}:{port}" for family, ip in records}
        if not found:
            return self._keep(host_port, "no addresses")
        if found != self._last_good.get(host_port):
            log.info("%s resolves to %s", host_port, ", ".join(sorted(found)))
        self._last_good[host_port] = found
        return found

    def _keep(self, host_port: str, why: str) -> set[str]:
        kept = self._last_good.get(host_port, set())
        log.warning("cannot resolve %s (%s); keeping the last good set of %d address(es)", host_port, why, len(kept))
        return set(kept)
