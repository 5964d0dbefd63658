"""The Converse read loop both ends of a turn stream share: read requests while the stream's work runs.

In: the client's ``ConverseRequest``s and a ``ConverseSide`` — what this end
does with them. Out: nothing; the side sends its own events. The loop keeps
reading while the side's work runs (the router's turn, the gateway's relay of
the router's events), so a CancelTurn, or the client going away, reaches that
work at once instead of after it. It dispatches StartTurn and CancelTurn,
hands SubmitToolResults on (the client's tool results for a waiting turn),
tells the side when its work ends, and ends cleanly on half-close (the side
finishes what runs: every turn still ends with its TurnCompleted) or on
cancellation or error (the side stops what runs; nobody is left to tell).

What differs between the two ends is the side's: the router runs one turn at
a time and ends each with exactly one TurnCompleted; the gateway admits each
turn by its id and relays the router's bytes untouched.

The servicer half of a stream lives here too: ``OpenStreams`` serialises a
stream's writes (grpc.aio allows one write in flight, a drain notice may race
the turn's events, and a write whose sender was cancelled still runs to its
end before the next starts) and keeps every open stream reachable for the drain
notice on shutdown. Once the notice has gone out, a stream opened after it is
refused with UNAVAILABLE (retry elsewhere) instead of being served, and
``announce`` returns only when the streams it told have closed: the gRPC server
stops after the drain hooks, and a stream that arrives once it has stopped is
not refused with UNAVAILABLE but reset, CANCELLED (seen in CI's gateway drain
test, twice), so the server keeps listening, and refusing in band, for as long
as streams are still finishing (at most the drain grace). The refusal waits
(at most ``REFUSE_READ_S``) for the client's first request before it sends the
status: a status that overtakes the client's first write makes grpc.aio's
``write`` fail locally as INTERNAL "Internal error from Core" and hides the
UNAVAILABLE (seen in CI's gateway drain test).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from typing import Any, Generic, Protocol, TypeVar

import grpc.aio

from agentmesh.agent.v1 import agent_pb2
from services.runtime.errors import Unavailable

Message = TypeVar("Message")


class ConverseSide(Protocol):
    """What one end of a Converse stream does with what the read loop hands it."""

    def running(self) -> asyncio.Task[None] | None:
        """The work the loop waits on beside the next request, if any runs."""

    async def work_ended(self, work: asyncio.Task[None]) -> bool:
        """``work`` (from ``running``) finished; True ends the stream (an error raised ends it too)."""

    async def start_turn(self, request: agent_pb2.ConverseRequest) -> None:
        """A StartTurn arrived (the whole request: the gateway forwards it as it is)."""

    async def cancel_turn(self, request: agent_pb2.ConverseRequest) -> None:
        """A CancelTurn arrived."""

    async def submit_tool_results(self, request: agent_pb2.ConverseRequest) -> None:
        """Results of client tool calls arrived (SubmitToolResults) for the turn that waits for them."""

    async def half_closed(self) -> None:
        """The client sent its last request: finish what runs, then the stream ends."""

    async def close(self, *, clean: bool) -> None:
        """The stream is ending; ``clean`` is False after cancellation or an error (stop what runs)."""


async def read_converse(requests: AsyncIterable[agent_pb2.ConverseRequest], side: ConverseSide) -> None:
    """Run one Converse stream's reading until it ends; see the module docstring."""
    reading = requests.__aiter__()
    next_request: asyncio.Future[agent_pb2.ConverseRequest] = asyncio.ensure_future(reading.__anext__())
    clean = False
    try:
        while True:
            work = side.running()
            waits: set[asyncio.Future[Any]] = {next_request} if work is None else {next_request, work}
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            if work is not None and work in done and await side.work_ended(work):
                clean = True
                return
            if next_request not in done:
                continue
            try:
                request = next_request.result()
            except StopAsyncIteration:
                await side.half_closed()
                clean = True
                return
            next_request = asyncio.ensure_future(reading.__anext__())
            action = request.WhichOneof("action")
            if action == "start_turn":
                await side.start_turn(request)
            elif action == "cancel_turn":
                await side.cancel_turn(request)
            elif action == "tool_results":
                await side.submit_tool_results(request)
    finally:
        next_request.cancel()
        await side.close(clean=clean)


class OpenStreams(Generic[Message]):
    """The write functions of a server's open Converse streams, each serialised, for the drain notice."""

    #: What a client opening a stream after the drain notice is told to wait before it retries (elsewhere).
    RETRY_AFTER_S = 1.0
    #: How long a refused stream waits for the client's first request before the status goes out anyway.
    REFUSE_READ_S = 1.0

    def __init__(self) -> None:
        self._sends: set[Callable[[Message], Awaitable[None]]] = set()
        self._announced = False
        self._all_closed = asyncio.Event()
        self._all_closed.set()

    @contextlib.asynccontextmanager
    async def open(
        self, context: grpc.aio.ServicerContext[Any, Message], requests: AsyncIterable[Any]
    ) -> AsyncIterator[Callable[[Message], Awaitable[None]]]:
        """A stream's ``send``, reachable by ``announce`` while the block runs; ``Unavailable`` once draining
        (after the client's first request from ``requests``, or ``REFUSE_READ_S``: see the module docstring)."""
        if self._announced:
            await _first_of(requests, self.REFUSE_READ_S)
            raise Unavailable(
                "the server is draining; open the stream on another replica",
                retry_after_s=self.RETRY_AFTER_S,
                reason="DRAINING",
            )
        writing = asyncio.Lock()

        def written(write: asyncio.Future[None]) -> None:
            writing.release()
            if not write.cancelled():
                write.exception()  # a sender that was cancelled meanwhile is not there to retrieve it

        async def send(message: Message) -> None:
            # The lock is held until gRPC has finished the write, not until the sender stops waiting: a sender
            # cancelled mid-write (CancelTurn, a deadline) leaves the write in flight in gRPC's core, and a
            # second write started then fails the stream (GRPC_CALL_ERROR_TOO_MANY_OPERATIONS).
            await writing.acquire()
            try:
                write = asyncio.ensure_future(context.write(message))
            except BaseException:
                writing.release()
                raise
            write.add_done_callback(written)
            await asyncio.shield(write)

        self._sends.add(send)
        self._all_closed.clear()
        try:
            yield send
        finally:
            self._sends.discard(send)
            if not self._sends:
                self._all_closed.set()

    async def announce(self, notice: Message) -> None:
        """Send ``notice`` on every open stream (a stream that is ending just misses it); refuse new ones;
        return once every stream has closed (the drain bounds the wait by its grace)."""
        self._announced = True
        await asyncio.gather(*(send(notice) for send in list(self._sends)), return_exceptions=True)
        await self._all_closed.wait()


async def _first_of(requests: AsyncIterable[Any], within_s: float) -> None:
    """Wait up to ``within_s`` for the stream's first request (or its end), without cancelling the RPC on timeout.

    ``asyncio.wait_for`` on a grpc.aio read cancels the whole RPC when it times out, so the read runs
    as a task that ``asyncio.wait`` leaves alone and is cancelled only once the wait is over.
    """
    first = asyncio.ensure_future(requests.__aiter__().__anext__())
    first.add_done_callback(lambda read: read.cancelled() or read.exception())  # retrieved: nobody awaits it
    try:
        await asyncio.wait({first}, timeout=within_s)
    finally:
        first.cancel()
