"""The shared Converse read loop: dispatch, reading while work runs, and how each way of ending reaches the side."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

from agentmesh.agent.v1 import agent_pb2
from services.runtime.converse_loop import OpenStreams, read_converse
from services.runtime.errors import Unavailable

START = agent_pb2.ConverseRequest(start_turn=agent_pb2.StartTurn(message="hi", turn_id="t1"))
CANCEL = agent_pb2.ConverseRequest(cancel_turn=agent_pb2.CancelTurn(turn_id="t1"))


class Requests:
    """A client's request stream, fed by the test; ``close`` is the half-close."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[agent_pb2.ConverseRequest | None] = asyncio.Queue()

    def send(self, request: agent_pb2.ConverseRequest | None) -> None:
        self._queue.put_nowait(request)

    async def __aiter__(self) -> AsyncIterator[agent_pb2.ConverseRequest]:
        while (request := await self._queue.get()) is not None:
            yield request


class Side:
    """Records what the loop hands it; a StartTurn starts work that runs until ``finish`` or cancellation."""

    def __init__(self, *, end_on_work: bool = False) -> None:
        self.calls: list[str] = []
        self.noted = asyncio.Condition()
        self.work: asyncio.Task[None] | None = None
        self.release = asyncio.Event()
        self.end_on_work = end_on_work

    async def note(self, call: str) -> None:
        async with self.noted:
            self.calls.append(call)
            self.noted.notify_all()

    def running(self) -> asyncio.Task[None] | None:
        return self.work

    async def work_ended(self, work: asyncio.Task[None]) -> bool:
        await self.note("work_ended")
        self.work = None
        return self.end_on_work

    async def start_turn(self, request: agent_pb2.ConverseRequest) -> None:
        await self.note(f"start:{request.start_turn.turn_id}")
        self.work = asyncio.create_task(self._run())

    async def _run(self) -> None:
        await self.release.wait()

    async def cancel_turn(self, request: agent_pb2.ConverseRequest) -> None:
        await self.note(f"cancel:{request.cancel_turn.turn_id}")
        if self.work is not None:
            self.work.cancel()

    async def submit_tool_results(self, request: agent_pb2.ConverseRequest) -> None:
        await self.note(f"results:{request.tool_results.turn_id}")

    async def half_closed(self) -> None:
        await self.note("half_closed")

    async def close(self, *, clean: bool) -> None:
        await self.note(f"close:{'clean' if clean else 'abandoned'}")


async def until(call: str, side: Side) -> None:
    async with asyncio.timeout(5), side.noted:
        await side.noted.wait_for(lambda: call in side.calls)


async def test_a_cancel_reaches_the_side_while_its_work_runs_and_the_half_close_ends_cleanly() -> None:
    requests, side = Requests(), Side()
    loop = asyncio.create_task(read_converse(requests, side))
    requests.send(START)
    await until("start:t1", side)
    requests.send(CANCEL)  # read while the work still runs
    await until("work_ended", side)
    requests.send(None)
    await asyncio.wait_for(loop, 5)
    assert side.calls == ["start:t1", "cancel:t1", "work_ended", "half_closed", "close:clean"]


async def test_work_that_ends_the_stream_ends_it_without_waiting_for_the_client() -> None:
    requests, side = Requests(), Side(end_on_work=True)
    loop = asyncio.create_task(read_converse(requests, side))
    requests.send(START)
    await until("start:t1", side)
    side.release.set()
    await asyncio.wait_for(loop, 5)
    assert side.calls == ["start:t1", "work_ended", "close:clean"]


async def test_a_stream_cancelled_mid_turn_closes_the_side_as_abandoned() -> None:
    requests, side = Requests(), Side()
    loop = asyncio.create_task(read_converse(requests, side))
    requests.send(START)
    await until("start:t1", side)
    loop.cancel()
    with pytest.raises(asyncio.CancelledError):
        await loop
    assert side.calls == ["start:t1", "close:abandoned"]


class _Context:
    """The one ServicerContext method OpenStreams uses."""

    def __init__(self) -> None:
        self.written: list[str] = []

    async def write(self, message: str) -> None:
        self.written.append(message)


async def test_open_streams_get_the_drain_notice_and_streams_opened_after_it_are_refused() -> None:
    streams: OpenStreams[str] = OpenStreams()
    open_one = _Context()
    async with streams.open(open_one, Requests()) as send:  # type: ignore[arg-type]
        await send("event")
        announcing = asyncio.ensure_future(streams.announce("draining"))
        await asyncio.sleep(0.05)
        assert open_one.written == ["event", "draining"]
        assert not announcing.done(), "the drain waits for the streams it told to close"
        late = Requests()
        refusing = asyncio.ensure_future(_open_and_leave(streams, late))
        await asyncio.sleep(0.05)
        assert not refusing.done(), "the refusal must wait for the client's first request"
        late.send(START)
        with pytest.raises(Unavailable) as refused:
            await asyncio.wait_for(refusing, 1.0)
    await asyncio.wait_for(announcing, 1.0)  # the last stream closed: the drain goes on
    assert refused.value.retry_after_s == OpenStreams.RETRY_AFTER_S
    assert refused.value.code == grpc.StatusCode.UNAVAILABLE


async def test_a_refused_stream_whose_client_sends_nothing_is_refused_after_the_bound() -> None:
    streams: OpenStreams[str] = OpenStreams()
    await streams.announce("draining")
    streams.REFUSE_READ_S = 0.05
    with pytest.raises(Unavailable):
        await asyncio.wait_for(_open_and_leave(streams, Requests()), 1.0)


async def _open_and_leave(streams: OpenStreams[str], requests: Requests) -> None:
    async with streams.open(_Context(), requests):  # type: ignore[arg-type]
        pass


class _SlowToClose:
    """An agent loop whose turn sends its TurnCompleted, then takes a while to finish closing."""

    def __init__(self) -> None:
        self.turns = 0

    async def run(self, request: object, progress: object) -> AsyncIterator[agent_pb2.ConverseResponse]:
        self.turns += 1
        yield agent_pb2.ConverseResponse(turn_completed=agent_pb2.TurnCompleted(turn_id=f"t{self.turns}"))
        await asyncio.sleep(0.05)  # e.g. closing its generators, aborting below


async def test_a_start_turn_right_after_turn_completed_waits_for_the_turn_to_finish_closing() -> None:
    from typing import cast

    from services.router.serving.converse import ConverseStream
    from services.router.turn.agent_loop import AgentLoop

    sent: list[agent_pb2.ConverseResponse] = []
    first_sent, both_sent = asyncio.Event(), asyncio.Event()

    async def send(message: agent_pb2.ConverseResponse) -> None:
        sent.append(message)
        first_sent.set()
        if len(sent) == 2:
            both_sent.set()

    async def nothing(start: agent_pb2.StartTurn, tenant: str) -> None:
        return None

    loop = _SlowToClose()
    stream = ConverseStream(cast(AgentLoop, loop), nothing, "tenant", send)
    first = agent_pb2.ConverseRequest(start_turn=agent_pb2.StartTurn(message="one"))

    async def requests() -> AsyncIterator[agent_pb2.ConverseRequest]:
        yield first
        await first_sent.wait()  # the client sends the next StartTurn as soon as the first TurnCompleted arrives
        yield agent_pb2.ConverseRequest(start_turn=agent_pb2.StartTurn(message="two"))
        await both_sent.wait()

    await asyncio.wait_for(stream.run(requests()), 5)
    assert [m.turn_completed.turn_id for m in sent] == ["t1", "t2"]
    assert all(m.turn_completed.finish_reason == 0 for m in sent)  # neither is an ERROR TurnCompleted
