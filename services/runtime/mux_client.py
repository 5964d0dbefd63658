"""The client side of a multiplexed bidi stream: one long-lived call to one peer, many requests by id.

Data flow::

    callers ──submit(id, slot, message)──▶ one write at a time ──▶ the call ──▶ the peer
    callers ◀── their slots (by id) ◀── received(message) ◀── reader task ◀── the call

One call per peer carries every request to it, so a request costs a message,
not an HTTP/2 stream and a round of headers. A subclass (the link to one
inference replica, to one tool executor) says what it opens (``open``), how a
message reaches the requests it concerns (``received``, on the reader task:
the request's *slot* is whatever the subclass hands results through, a future
or an inbox), and how its requests fail when the call breaks (``lost``). What
every such link must get right is here:

- Connected means the peer took the stream: with ``greeting`` the peer speaks
  first (an inference replica sends its load report), and that message is
  awaited; otherwise the call's connection is. Until then ``submit`` fails at
  once, so a caller can go elsewhere instead of waiting out its timeout.
- When the call breaks (or the link closes), ``lost`` fails every request in
  flight and the reader reconnects with full-jitter backoff, on a fresh
  channel per attempt (a restarted peer is dialled anew, not after the old
  channel's own backoff) unless the link was given one ``channel`` for life
  (one that other calls use too).
- grpc.aio allows one write in flight per call, and a write whose awaiting
  task is cancelled cancels the *whole call* (grpc.aio's ``_write`` does so on
  CancelledError). So no caller ever awaits ``call.write``: every message goes
  through the link's outbox to one writer task per call, and ``submit`` awaits
  only a future the writer resolves. A caller cancelled mid-submit loses its
  future, never the stream every other request shares. (A tracing
  interceptor's write queue used to hide this: without one, start-cancel
  cycles cancelled the link; ``tests/reliability/test_cycles.py``.)
- A caller that goes away before its request ended calls ``release`` with the
  cancel message, which frees its id and tells the peer, so the work stops
  there too; best effort, since a broken stream has nothing left to cancel.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar, cast

import grpc
import grpc.aio

from services.runtime.resilience import full_jitter_backoff

log = logging.getLogger(__name__)

ReqT = TypeVar("ReqT")
RespT = TypeVar("RespT")
SlotT = TypeVar("SlotT")


ItemT = TypeVar("ItemT")


class Inbox(Generic[ItemT]):
    """One request's items, from a link's reader task to the request's consumer.

    A list and one future rather than an ``asyncio.Queue``: the reader appends (``put``) and wakes the consumer
    if it waits; the consumer takes whatever queued meanwhile in one go, so one that falls behind gets larger
    deliveries, not more of them.
    """

    __slots__ = ("items", "waiter")

    def __init__(self) -> None:
        self.items: list[ItemT] = []
        self.waiter: asyncio.Future[None] | None = None

    def put(self, item: ItemT) -> None:
        self.items.append(item)
        self.wake()

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        self.waiter = asyncio.get_running_loop().create_future()
        try:
            await self.waiter
        finally:
            self.waiter = None


class StreamDown(ConnectionError):
    """The request could not be sent: the stream is not connected, or the write failed."""


class MuxClient(ABC, Generic[ReqT, RespT, SlotT]):
    """See module docstring. ``start`` once; ``close`` when the peer leaves."""

    #: The peer's first message marks the stream as taken (and is handed to ``received``).
    greeting = False
    #: Added to every reconnect delay, so a dead peer is not dialled in a tight loop.
    retry_floor_s = 0.0
    #: Who the peer is, for the log.
    peer = "peer"

    def __init__(
        self,
        target: str,
        channel_factory: Callable[[str], grpc.aio.Channel],
        *,
        channel: grpc.aio.Channel | None = None,
    ) -> None:
        """With ``channel``, every attempt uses it and ``close`` closes it; without, each attempt makes its own."""
        self.target = target
        self._channel_factory = channel_factory
        self._channel = channel
        self._slots: dict[str, SlotT] = {}
        self._call: grpc.aio.StreamStreamCall[ReqT, RespT] | None = None
        self._connected = asyncio.Event()
        # Whether the peer was ever reached: a link not connected now is then ``down``, not still starting.
        self._reached = False
        # Messages for the current call, in order, each with the future its submitter awaits (None: nobody waits).
        self._outbox: deque[tuple[ReqT, asyncio.Future[None] | None]] = deque()
        self._outbox_filled = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    # -- what the subclass says -------------------------------------------

    @abstractmethod
    def open(self, channel: grpc.aio.Channel) -> grpc.aio.StreamStreamCall[ReqT, RespT]:
        """Start the call on ``channel``."""

    @abstractmethod
    def received(self, message: RespT) -> None:
        """Hand one message from the peer to the slots it concerns (on the reader task: do not block)."""

    @abstractmethod
    def lost(self, why: str, was_connected: bool) -> None:
        """The call broke or the link closed: fail every request in ``_slots``."""

    # -- lifecycle --------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._maintain(), name=f"{self.peer}-link-{self.target}")

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._channel is not None:
            await self._channel.close()

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    @property
    def down(self) -> bool:
        """The peer was connected and went away, and has not been reached again (a link that never connected
        is not down: it may still be starting). Callers fail at once on a down link instead of waiting."""
        return self._reached and not self.connected

    @property
    def in_flight(self) -> int:
        """Requests submitted on this link and not yet released."""
        return len(self._slots)

    async def wait_connected(self, within_s: float | None = None) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._connected.wait(), within_s)
        return self.connected

    async def _maintain(self) -> None:
        attempt = 0
        while not self._closed:
            channel = self._channel or self._channel_factory(self.target)
            why = "link closed"
            writer: asyncio.Task[None] | None = None
            try:
                call = self._call = self.open(channel)
                writer = asyncio.create_task(self._write_loop(call), name=f"{self.peer}-writer-{self.target}")
                first = await call.read() if self.greeting else None
                if first is grpc.aio.EOF:
                    raise ConnectionError("stream ended")
                if first is None:
                    await call.wait_for_connection()
                self._connected.set()
                self._reached = True
                attempt = 0
                log.info("connected to %s %s", self.peer, self.target)
                if first is not None:
                    self.received(cast("RespT", first))
                while (message := await call.read()) is not grpc.aio.EOF:
                    self.received(cast("RespT", message))
                raise ConnectionError("stream ended")
            except (grpc.aio.AioRpcError, ConnectionError) as exc:
                why = exc.code().name if isinstance(exc, grpc.aio.AioRpcError) else str(exc)
                if self.connected:
                    log.warning("lost %s %s: %s", self.peer, self.target, why)
            finally:
                was_connected = self.connected
                self._connected.clear()
                if writer is not None:
                    writer.cancel()
                    await asyncio.gather(writer, return_exceptions=True)
                self._drop_outbox(why)
                self.lost(why, was_connected)
                if channel is not self._channel:
                    await channel.close()
            attempt += 1
            await asyncio.sleep(self.retry_floor_s + full_jitter_backoff(attempt, base_s=0.1, cap_s=2.0))

    async def _write_loop(self, call: grpc.aio.StreamStreamCall[ReqT, RespT]) -> None:
        """Write the outbox to ``call`` in order, one write at a time; the only task that awaits ``call.write``."""
        outbox = self._outbox
        while True:
            if not outbox:
                self._outbox_filled.clear()
                await self._outbox_filled.wait()
                continue
            message, written = outbox.popleft()
            try:
                await call.write(message)
            except asyncio.CancelledError:  # the call is being torn down
                _settle(written, "link closed")
                raise
            except Exception as exc:  # AioRpcError, InvalidStateError: the call broke under us
                _settle(written, f"write failed: {exc}")
                self._drop_outbox(f"write failed: {exc}")
                return  # the reader sees the broken call and reconnects
            _settle(written)

    def _drop_outbox(self, why: str) -> None:
        """Fail every unsent message's submitter: the call they were meant for is gone."""
        while self._outbox:
            _settle(self._outbox.popleft()[1], why)

    def _send(self, message: ReqT, written: asyncio.Future[None] | None) -> None:
        self._outbox.append((message, written))
        self._outbox_filled.set()

    # -- requests ---------------------------------------------------------

    async def submit(self, request_id: str, slot: SlotT, message: ReqT) -> None:
        """Register ``slot`` under ``request_id`` and send ``message``; the caller then ``release``s the id,
        whatever happens. Raises StreamDown when not connected or when the write fails."""
        call = self._call
        if call is None or not self.connected:
            raise StreamDown("not connected")
        self._slots[request_id] = slot
        written: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._send(message, written)
        await written  # cancelling this cancels only the future; the writer still sends (release's cancel follows)

    async def release(self, request_id: str, cancel: ReqT | None = None) -> None:
        """Free the id; with ``cancel`` (the request had not ended), tell the peer if the stream is up."""
        self._slots.pop(request_id, None)
        if cancel is not None and self._call is not None and self.connected:
            self._send(cancel, None)


def _settle(written: asyncio.Future[None] | None, failed: str | None = None) -> None:
    """Tell a submitter (if one waits, and has not gone) that its message was written, or why not."""
    if written is None or written.done():
        return
    if failed is None:
        written.set_result(None)
    else:
        written.set_exception(StreamDown(failed))
