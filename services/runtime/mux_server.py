"""The server side of a multiplexed bidi stream: requests by id in, their messages out, one write at a time.

Data flow::

    caller ──open/cancel──▶ MuxServer.run ──received()──▶ start(id, work) ──task per id──▶ work
    caller ◀──messages── send() / send_built() (one write in flight) ◀── work's reply, or the session's frames

One stream carries every request of one caller, so a caller pays for one
HTTP/2 stream per peer, not per request, and a request costs a message, not a
call. The session (a subclass) decodes each incoming message in ``received``
and either starts a request (``start``: its own task, keyed by id) or cancels
one (``cancel``). What the session does per request (the engine call, the tool
call) is its own; what every such stream must get right is here:

- A request cancelled by the caller and one cancelled because the stream is
  going away both see ``CancelledError``; ``cancelled(id)`` tells them apart,
  so the first can report its end and the second, with nobody to tell, re-raises.
- An exception that escapes a request's work ends that request only: it is
  logged and ``failed`` turns it into the request's final message; the stream
  and its other requests go on.
- When the caller half-closes, requests in flight finish and their replies go
  out before the call ends; when the caller goes away (or the call ends
  otherwise), every request task is cancelled, which aborts the work below it.
- grpc.aio allows one write in flight per call: ``send`` serialises them.
  ``send_built`` builds its message only once the stream is free, so whatever
  accumulated while the previous write was in flight leaves in that one
  message (a slow reader gets larger messages, not a backlog).

A request's id is released before its reply is written: a cancel that arrives
while the reply is on its way finds nothing to cancel, and the id may be
reused once the reply is out.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, Generic, TypeVar

log = logging.getLogger(__name__)

InT = TypeVar("InT")
OutT = TypeVar("OutT")


class MuxServer(ABC, Generic[InT, OutT]):
    """See module docstring. One instance per call; subclasses implement ``received`` (and may ``failed``)."""

    def __init__(self, write: Callable[[OutT], Awaitable[None]], *, name: str) -> None:
        self._write = write
        self._name = name
        self._writing = asyncio.Lock()
        self._live: dict[str, asyncio.Task[None]] = {}
        self._cancelled: set[str] = set()
        self._wake = asyncio.Event()

    @abstractmethod
    async def received(self, message: InT) -> None:
        """Handle one message from the caller: ``start`` a request, ``cancel`` one, or answer at once."""

    def failed(self, request_id: str, error: Exception) -> OutT | None:
        """The final message for a request whose work raised ``error`` (already logged); None sends nothing."""
        return None

    async def run(self, requests: AsyncIterator[InT]) -> None:
        """Serve the call until the caller half-closes and every request has finished, or until it goes away."""
        try:
            async for message in requests:
                await self.received(message)
            while self._live:
                await asyncio.gather(*self._live.values(), return_exceptions=True)
        finally:
            tasks = list(self._live.values())
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    # -- requests ---------------------------------------------------------

    def is_live(self, request_id: str) -> bool:
        return request_id in self._live

    def start(self, request_id: str, work: Coroutine[Any, Any, OutT | None]) -> None:
        """Run ``work`` as the request's task; what it returns (if not None) is its reply, written once the id
        is released. The caller checks ``is_live`` first: an id names one live request."""
        task = asyncio.create_task(self._settle(request_id, work), name=f"{self._name}-{request_id}")
        self._live[request_id] = task

    def cancel(self, request_id: str) -> bool:
        """The caller's cancel: the request's work sees ``CancelledError`` with ``cancelled(id)`` true.
        False when no such request is live (finished already, or never was)."""
        task = self._live.get(request_id)
        if task is None:
            return False
        self._cancelled.add(request_id)
        task.cancel()
        return True

    def cancelled(self, request_id: str) -> bool:
        """Whether the caller cancelled the request (rather than the stream ending under it)."""
        return request_id in self._cancelled

    async def _settle(self, request_id: str, work: Coroutine[Any, Any, OutT | None]) -> None:
        try:
            reply = await work
        except Exception as exc:  # one request's failure must not end the stream
            log.exception("request %s on %s failed", request_id, self._name)
            reply = self.failed(request_id, exc)
        finally:
            self._live.pop(request_id, None)
            self._cancelled.discard(request_id)
        if reply is not None:
            await self.send(reply)

    # -- writes -----------------------------------------------------------

    async def send(self, message: OutT) -> None:
        async with self._writing:
            await self._write(message)

    async def send_built(self, build: Callable[[], OutT | None]) -> None:
        """Write what ``build`` returns when the stream is free (nothing if it returns None)."""
        async with self._writing:
            message = build()
            if message is not None:
                await self._write(message)

    def wake_writer(self) -> None:
        """Something is pending for ``write_coalesced``'s next message."""
        self._wake.set()

    async def write_coalesced(self, build: Callable[[], OutT | None]) -> None:
        """The session's writer task: one message per wake-up, built by ``build`` from whatever is pending.

        After a wake-up it yields to the event loop once, so every request that advanced in the same loop turn
        (one engine step, one flush tick) lands in the same message: coalescing never holds anything longer
        than one loop turn, and a slow reader makes messages grow rather than pile up. It sleeps on an event
        alone (no ``wait_for``, which costs a task and a timer per message).
        """
        while True:
            await self._wake.wait()
            await asyncio.sleep(0)
            self._wake.clear()
            await self.send_built(build)
