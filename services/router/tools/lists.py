"""The tools each tenant may use, as the tool executor lists them, kept current.

``ToolLists.get(tenant)`` returns that tenant's ``ToolList`` (its specs and
the executor's revision of the list). The first ask for a tenant starts
following its list: a ``WatchTools`` stream with the tenant in the metadata
sends the list at once and again whenever it changes (an MCP server's
``tools/list_changed``, a server that went away or came back). A stream that
ends (the executor drains) or breaks is opened again, with backoff; an
executor without ``WatchTools`` (UNIMPLEMENTED) is polled with ``ListTools``
every ``poll_s`` instead. Until a tenant's first list arrives, ``get`` waits
up to ``within_s`` (not at all while the executor is down: it went away and
has not come back) and then returns the list open to every tenant (a part of
any tenant's), or raises ``Unavailable`` without one; after that it returns the
newest list at once, the last good one while the executor is unreachable
(calls then fail in band as UNAVAILABLE). The empty tenant is the list open to
every tenant (the router's warm-up). At most ``max_tenants`` lists are
followed; the least recently asked is dropped first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from dataclasses import dataclass, field

import grpc
import grpc.aio

from agentmesh.common.v1 import common_pb2
from agentmesh.tools.v1 import tools_pb2
from services.router.tools.link import ToolsLink
from services.runtime.errors import Unavailable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolList:
    """One tenant's tools; equal revisions, equal lists."""

    specs: list[common_pb2.ToolSpec]
    revision: str

    @classmethod
    def of(cls, reply: tools_pb2.ListToolsResponse) -> ToolList:
        specs = list(reply.tools)
        # An executor that sends no revision: the names and versions say as much (ToolSpec.version follows the
        # description and schema).
        revision = reply.revision or "|".join(f"{t.name}@{t.version}" for t in specs)
        return cls(specs, revision)


@dataclass
class _Follow:
    """One tenant's list as it is followed."""

    current: ToolList | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def update(self, reply: tools_pb2.ListToolsResponse) -> bool:
        new = ToolList.of(reply)
        changed = self.current is None or new.revision != self.current.revision
        self.current = new
        self.ready.set()
        return changed


class ToolLists:
    """Every tenant's tool list, followed (see module docstring)."""

    def __init__(
        self,
        tools: ToolsLink,
        *,
        poll_s: float = 10.0,
        max_tenants: int = 256,
        retry_s: float = 0.5,
        max_retry_s: float = 10.0,
    ) -> None:
        self._tools = tools
        self._poll_s = poll_s
        self._max_tenants = max_tenants
        self._retry_s = retry_s
        self._max_retry_s = max_retry_s
        self._follows: OrderedDict[str, _Follow] = OrderedDict()

    async def get(self, tenant: str, within_s: float = 5.0) -> ToolList:
        follow = self._follows.get(tenant)
        if follow is None:
            follow = self._follows[tenant] = _Follow()
            follow.task = asyncio.create_task(self._follow(tenant, follow), name=f"tool list of {tenant or '*'}")
            while len(self._follows) > self._max_tenants:
                _, dropped = self._follows.popitem(last=False)
                if dropped.task is not None:
                    dropped.task.cancel()
        else:
            self._follows.move_to_end(tenant)
        if follow.current is None and not self._tools.down:  # an executor that went away sends no list
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(within_s):
                    await follow.ready.wait()
        if follow.current is None:
            # The tools open to every tenant are a part of any tenant's: with the executor away before this
            # tenant's own list arrived (killed, draining, not up yet on this router), the turn goes on with them
            # and its calls fail in band, as they do for a tenant whose list is known.
            shared = self._follows.get("")
            if tenant and shared is not None and shared.current is not None:
                return shared.current
            raise Unavailable("the tool executor has not listed its tools yet", retry_after_s=1.0)
        return follow.current

    async def close(self) -> None:
        tasks = [f.task for f in self._follows.values() if f.task is not None]
        self._follows.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _follow(self, tenant: str, follow: _Follow) -> None:
        delay = self._retry_s
        while True:
            try:
                call = await self._tools.watch_tools(tenant)
                try:
                    async for snapshot in call:
                        if follow.update(snapshot.tools):
                            log.info(
                                "tools of %s: %d, revision %s",
                                tenant or "*",
                                len(snapshot.tools.tools),
                                snapshot.tools.revision[:12],
                            )
                        delay = self._retry_s
                finally:
                    call.cancel()
                log.debug("WatchTools for %s ended (executor draining); watching again", tenant or "*")
            except grpc.aio.AioRpcError as exc:
                if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                    log.info("the tool executor has no WatchTools: polling ListTools every %.0f s", self._poll_s)
                    await self._poll(tenant, follow)
                    return
                log.debug("WatchTools for %s failed: %s", tenant or "*", exc.code().name)
            except Unavailable as exc:
                log.debug("WatchTools for %s: %s", tenant or "*", exc.message)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._max_retry_s)

    async def _poll(self, tenant: str, follow: _Follow) -> None:
        while True:
            try:
                follow.update(await self._tools.list_tools(tenant))
            except (grpc.aio.AioRpcError, Unavailable) as exc:
                why = exc.code().name if isinstance(exc, grpc.aio.AioRpcError) else exc.message
                log.debug("ListTools for %s failed: %s", tenant or "*", why)
            await asyncio.sleep(self._poll_s)
