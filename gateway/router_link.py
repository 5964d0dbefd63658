"""The gateway's Relay stream to one router: every Complete it sends there, multiplexed on one call.

In: ``complete(start)`` from any number of concurrent Complete handlers. Out:
that request's events as the router serialized them (bytes, relayed to the
client untouched), then its end: nothing more for a completed request,
``RelayFailed`` with the router's status for a failed one, ``RouterLost``
when the stream broke under it. The stream itself (connect once the router's
RelayReady arrives, reconnect with backoff, one writer task, cancel on
consumer exit) is ``runtime/mux_client.py``'s; this link adds what is the
router's side of it: the reader hands each frame's events to per-request
slots (one wake-up per request per message, however many events it carries),
and a router that announces draining gets no new request on this stream
(``complete`` raises ``StreamDown`` at once, so the caller tries the next
router) while the requests in flight finish. A request that finds the stream
not yet connected (the router just came up) waits up to ``CONNECT_WAIT_S`` for
it before giving up on this router.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable

import grpc.aio
from google.rpc import status_pb2

from agentmesh.agent.v1 import relay_pb2, relay_pb2_grpc
from services.runtime.mux_client import Inbox, MuxClient, StreamDown
from services.runtime.status_decode import rich_error_of_status

#: How long a request waits for a healthy router's stream to connect before trying the next router.
CONNECT_WAIT_S = 1.0


class RouterLost(ConnectionError):
    """The Relay stream broke while the request ran."""


class RelayFailed(Exception):
    """The router ended the request with an error: ``status`` is its serialized google.rpc.Status, ``rich``
    what it says."""

    def __init__(self, status: bytes) -> None:
        self.status = status
        self.rich = rich_error_of_status(status_pb2.Status.FromString(status))
        super().__init__(f"the router ended the request with {self.rich.code.name}: {self.rich.message}")


class _Slot(Inbox[bytes]):
    """One request's events (``items``), from the reader task to the request's handler, and how it ended."""

    __slots__ = ("end", "lost", "status")

    def __init__(self) -> None:
        super().__init__()
        self.end = False
        self.status = b""
        self.lost: str | None = None

    def put_frame(self, frame: relay_pb2.RelayFrame) -> None:
        self.items.extend(frame.events)
        if frame.end:
            self.end = True
            self.status = frame.status
        self.wake()

    def lose(self, why: str) -> None:
        self.end = True
        self.lost = why
        self.wake()


class RouterLink(MuxClient[relay_pb2.RelayRequest, relay_pb2.RelayResponse, _Slot]):
    """See module docstring."""

    greeting = True  # the router sends RelayReady first
    retry_floor_s = 0.05
    peer = "router"

    def __init__(self, target: str, channel_factory: Callable[[str], grpc.aio.Channel]) -> None:
        super().__init__(target, channel_factory)
        self.draining = False

    def open(
        self, channel: grpc.aio.Channel
    ) -> grpc.aio.StreamStreamCall[relay_pb2.RelayRequest, relay_pb2.RelayResponse]:
        return relay_pb2_grpc.RelayServiceStub(channel).Relay()

    def received(self, message: relay_pb2.RelayResponse) -> None:
        kind = message.WhichOneof("kind")
        if kind == "frames":
            slots = self._slots
            for frame in message.frames.frames:
                slot = slots.get(frame.id)
                if slot is not None:
                    slot.put_frame(frame)
        elif kind == "ready":
            self.draining = False
        elif kind == "draining":
            self.draining = True

    def lost(self, why: str, was_connected: bool) -> None:
        for slot in self._slots.values():
            slot.lose(why)

    async def complete(self, start: relay_pb2.RelayStart) -> AsyncGenerator[bytes, None]:
        """The request's events; see module docstring. Raises StreamDown before anything was sent."""
        if self.draining:
            raise StreamDown("the router is draining")
        if not self.connected:  # a router that just came up (or back) is usually a moment from taking the stream
            await self.wait_connected(CONNECT_WAIT_S)
        rid = start.id
        slot = _Slot()
        try:
            await self.submit(rid, slot, relay_pb2.RelayRequest(start=start))
            while True:
                if not slot.items and not slot.end:
                    await slot.wait()
                events, slot.items = slot.items, []
                for event in events:
                    yield event
                if slot.end and not slot.items:
                    break
        finally:
            cancel = None if slot.end else relay_pb2.RelayRequest(cancel=relay_pb2.RelayCancel(id=rid))
            await self.release(rid, cancel)
        if slot.lost is not None:
            raise RouterLost(f"router {self.target}: {slot.lost}")
        if slot.status:
            raise RelayFailed(slot.status)
