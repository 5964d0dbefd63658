"""The peers behind a client's targets: one object per address, following the set as DNS changes it.

The gateway's router pool (a channel and a health watcher per router), the
router's replica set (a Generate link per inference replica) and its tools link
(an Execute stream per tool executor) all keep "one peer per resolved
address": resolve the targets, open a peer for each address that joined, let
go of each that left, and for ``dns:`` targets do it again every
``refresh_s``. A failed lookup keeps the last good set (``resolver.py``), and a
refresh that raises is logged and the set stays as it was, so a DNS hiccup
never closes the peers that carry work in flight. This class is that loop;
each owner says how to open one peer and how to let go of one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from services.runtime.resolver import Resolver

log = logging.getLogger(__name__)

P = TypeVar("P")


class PeerSet(Generic[P]):
    def __init__(
        self,
        resolver: Resolver,
        *,
        join: Callable[[str], P],
        leave: Callable[[str, P], Awaitable[None]],
        refresh_s: float,
        what: str,
    ) -> None:
        self._resolver = resolver
        self._join = join
        self._leave = leave
        self._refresh_s = refresh_s
        self._what = what
        #: The current peers by address; owners read it, only ``refresh`` and ``join_now`` change it.
        self.peers: dict[str, P] = {}
        #: Set once a refresh has left at least one peer (callers wait on it for their first peer).
        self.found = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def dynamic(self) -> bool:
        return self._resolver.dynamic

    def join_now(self, address: str) -> None:
        """A peer known without a lookup (a static target), joined at once rather than at the first refresh."""
        if address not in self.peers:
            self.peers[address] = self._join(address)

    async def refresh(self) -> None:
        """Bring the peers in line with the targets' current addresses."""
        wanted = await self._resolver.resolve()
        for gone in set(self.peers) - wanted:
            log.info("%s %s left the set", self._what, gone)
            await self._leave(gone, self.peers.pop(gone))
        for new in sorted(wanted - set(self.peers)):
            log.info("%s %s joined the set", self._what, new)
            self.peers[new] = self._join(new)
        if self.peers:
            self.found.set()

    def follow(self, *, refresh_first: bool) -> None:
        """Refresh in the background every ``refresh_s`` (first at once with ``refresh_first``); static
        targets are refreshed at most that once, since their set never changes."""
        if refresh_first or self.dynamic:
            self._task = asyncio.create_task(self._loop(refresh_first), name=f"{self._what}-refresh")

    async def stop(self) -> None:
        """Stop following (the owner lets go of its peers itself)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _loop(self, refresh_first: bool) -> None:
        wait = not refresh_first
        while True:
            if wait:
                await asyncio.sleep(self._refresh_s)
            wait = True
            try:
                await self.refresh()
            except Exception:  # the loop must outlive one bad refresh; the set stays as it was
                log.exception("refreshing the %s set failed", self._what)
            if not self.dynamic:
                return
