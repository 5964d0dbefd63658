"""The router's per-tenant tool lists (a follower over a fake ToolsLink) and its planner per tool list."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

import grpc
import grpc.aio
import numpy as np
import pytest

from agentmesh.common.v1 import common_pb2
from agentmesh.tools.v1 import tools_pb2
from services.router.planning import Planner
from services.router.planning.embedding import Vectors
from services.router.tools.link import ToolsLink
from services.router.tools.lists import ToolList, ToolLists
from services.router.tools.planners import MemoEmbedder, Planners
from services.runtime.errors import Unavailable
from tests.support.waiting import eventually


def listing(*names: str, revision: str = "") -> tools_pb2.ListToolsResponse:
    return tools_pb2.ListToolsResponse(
        tools=[common_pb2.ToolSpec(name=n, version="1") for n in names], revision=revision or "+".join(names)
    )


class Unimplemented(grpc.aio.AioRpcError):
    def __init__(self) -> None:
        super().__init__(grpc.StatusCode.UNIMPLEMENTED, grpc.aio.Metadata(), grpc.aio.Metadata(), "no WatchTools")


class FakeLink:
    """ListTools and WatchTools by tenant; ``watch`` False answers WatchTools with UNIMPLEMENTED."""

    def __init__(self, *, watch: bool) -> None:
        self.watch = watch
        self.lists: dict[str, tools_pb2.ListToolsResponse] = {}
        self.snapshots: dict[str, asyncio.Queue[tools_pb2.ListToolsResponse | None]] = {}
        self.watches = 0
        self.down = False

    async def list_tools(self, tenant: str = "", timeout_s: float = 5.0) -> tools_pb2.ListToolsResponse:
        return self.lists[tenant]

    async def watch_tools(self, tenant: str = "", timeout_s: float = 5.0) -> Any:
        if not self.watch:
            raise Unimplemented()
        self.watches += 1
        queue = self.snapshots.setdefault(tenant, asyncio.Queue())
        return _Call(queue)


class _Call:
    def __init__(self, queue: asyncio.Queue[tools_pb2.ListToolsResponse | None]) -> None:
        self._queue = queue

    def __aiter__(self) -> AsyncIterator[tools_pb2.WatchToolsResponse]:
        return self._read()

    async def _read(self) -> AsyncIterator[tools_pb2.WatchToolsResponse]:
        while (reply := await self._queue.get()) is not None:  # None: the executor drained, the stream ends
            yield tools_pb2.WatchToolsResponse(tools=reply)

    def cancel(self) -> bool:
        return True


async def test_each_tenant_gets_its_own_list_and_its_changes_and_a_drained_stream_is_watched_again() -> None:
    link = FakeLink(watch=True)
    lists = ToolLists(cast(ToolsLink, link), retry_s=0.01)
    try:
        link.snapshots["acme"] = asyncio.Queue()
        link.snapshots["other"] = asyncio.Queue()
        link.snapshots["acme"].put_nowait(listing("calc", "private__add"))
        link.snapshots["other"].put_nowait(listing("calc"))
        assert [t.name for t in (await lists.get("acme")).specs] == ["calc", "private__add"]
        assert [t.name for t in (await lists.get("other")).specs] == ["calc"]
        link.snapshots["acme"].put_nowait(None)  # drained: the follower opens WatchTools again
        link.snapshots["acme"].put_nowait(listing("calc", "private__add", "wb__extra"))
        await eventually(lambda: link.watches == 3)
        await eventually(lambda: len(lists._follows["acme"].current.specs) == 3)  # type: ignore[union-attr]
        assert (await lists.get("acme")).revision == "calc+private__add+wb__extra"
        assert [t.name for t in (await lists.get("other")).specs] == ["calc"]
    finally:
        await lists.close()


async def test_an_executor_without_watch_tools_is_polled() -> None:
    link = FakeLink(watch=False)
    link.lists[""] = listing("calc")
    lists = ToolLists(cast(ToolsLink, link), poll_s=0.01)
    try:
        assert [t.name for t in (await lists.get("")).specs] == ["calc"]
        link.lists[""] = listing("calc", "clock")
        await eventually(lambda: lists._follows[""].current is not None and len(lists._follows[""].current.specs) == 2)
    finally:
        await lists.close()


async def test_no_list_yet_is_unavailable() -> None:
    link = FakeLink(watch=True)
    lists = ToolLists(cast(ToolsLink, link))
    try:
        with pytest.raises(Unavailable):
            await lists.get("acme", within_s=0.05)
    finally:
        await lists.close()


@pytest.mark.parametrize("down", [False, True])
async def test_a_tenant_whose_list_has_not_come_gets_the_list_open_to_every_tenant(down: bool) -> None:
    link = FakeLink(watch=True)
    lists = ToolLists(cast(ToolsLink, link))
    try:
        link.snapshots[""] = asyncio.Queue()
        link.snapshots[""].put_nowait(listing("calc"))
        assert [t.name for t in (await lists.get("")).specs] == ["calc"]
        # The executor went away before this tenant's own list arrived (never sent here): the shared part, after
        # the wait while the executor is up; at once while it is down (no list can come: not the 30 s wait).
        link.down = down
        async with asyncio.timeout(1.0):
            assert [t.name for t in (await lists.get("acme", within_s=0.05 if not down else 30)).specs] == ["calc"]
    finally:
        await lists.close()


class FakePlanner:
    replans = False

    def __init__(self) -> None:
        self.prepared: list[list[str]] = []

    async def prepare(self, specs: list[common_pb2.ToolSpec]) -> None:
        self.prepared.append([t.name for t in specs])


async def test_each_tool_list_has_its_own_planner_prepared_once() -> None:
    made: list[FakePlanner] = []

    def new() -> Planner:
        made.append(FakePlanner())
        return cast(Planner, made[-1])

    first = FakePlanner()
    planners = Planners(cast(Planner, first), new)
    shared = ToolList.of(listing("calc"))
    private = ToolList.of(listing("calc", "private__add"))
    a, b, c = await asyncio.gather(planners.for_list(shared), planners.for_list(private), planners.for_list(shared))
    assert a is c is cast(Planner, first) and b is cast(Planner, made[0])
    assert first.prepared == [["calc"], ["calc"]] and made[0].prepared == [["calc", "private__add"]]


class CountingEmbedder:
    name = "counting"

    def __init__(self) -> None:
        self.texts: list[str] = []

    async def embed(self, texts: Any) -> Vectors:
        self.texts += list(texts)
        return np.asarray([[float(len(t)), 1.0] for t in texts], dtype=np.float32).reshape(len(texts), 2)


async def test_card_texts_are_embedded_once_for_every_planner() -> None:
    inner = CountingEmbedder()
    memo = MemoEmbedder(inner)
    first = await memo.embed(["add two numbers", "what time is it"])
    again = await memo.embed(["what time is it", "a new tool", "add two numbers"])
    assert inner.texts == ["add two numbers", "what time is it", "a new tool"]
    assert np.array_equal(again[0], first[1]) and np.array_equal(again[2], first[0])
