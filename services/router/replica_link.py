"""One long-lived, multiplexed Generate stream to one inference replica.

In: ``generate(submit)`` from any number of concurrent turns. Out: that
request's ``GenerationDelta``s, in order, ending with the one that carries the
result. A reader task dispatches each frame's deltas to per-request queues
and keeps the replica's latest load report. If the stream breaks, every
request on it fails with ``ReplicaDown`` (so the caller can fail over) and the
link reconnects with backoff. A consumer that falls behind gets the deltas
queued for it merged into one, so a slow relay sends fewer, larger messages.
With ``hold_s`` a consumer, after each delivery, is woken only by the first
delta at least ``hold_s`` later (or at once by the result or a broken link)
and gets what came meanwhile merged: at a steady token cadence it is not
woken per engine step (BENCHMARKS.md, relay).
A request whose consumer goes away is aborted on the replica. Writes are
serialised: grpc.aio allows one write in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any

import grpc
import grpc.aio

from agentmesh.inference.v1 import inference_pb2, inference_pb2_grpc
from services.runtime.errors import Unavailable
from services.runtime.resilience import BreakerState, CircuitBreaker, full_jitter_backoff

log = logging.getLogger(__name__)


class ReplicaDown(Unavailable):
    """The replica's stream broke or its engine is unavailable."""

    def __init__(self, replica: str, why: str) -> None:
        super().__init__(f"inference replica {replica} is unavailable: {why}", retry_after_s=0.5)
        self.replica = replica


_LINK_DOWN = object()


def _merge(items: list[Any]) -> tuple[inference_pb2.GenerationDelta, list[Any]]:
    """The leading deltas of ``items`` as one (up to and including a result), and what is left: a link-down
    marker is never merged, so the caller delivers the text before it and then fails."""
    first: inference_pb2.GenerationDelta = items[0]
    if len(items) == 1 or first.HasField("result"):
        return first, items[1:]
    texts, count = [first.text], first.token_count
    result: inference_pb2.GenerationResult | None = None
    n = 1
    for item in items[1:]:
        if isinstance(item, tuple):
            break
        n += 1
        texts.append(item.text)
        count += item.token_count
        if item.HasField("result"):
            result = item.result
            break
    merged = inference_pb2.GenerationDelta(request_id=first.request_id, text="".join(texts), token_count=count)
    if result is not None:
        merged.result.CopyFrom(result)
    return merged, items[n:]


class _Inbox:
    """One request's deltas, from the reader task to the request's consumer.

    A list and one future rather than an ``asyncio.Queue``: the reader appends, and wakes the consumer only
    when it wants to be woken: for any item (``until`` None), or, while it holds text, for the first item at
    or after ``until`` (monotonic) and for one that ends the request. No timer: a hold ends with a delta.
    """

    __slots__ = ("final", "items", "until", "waiter")

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.waiter: asyncio.Future[None] | None = None
        self.until: float | None = None
        self.final = False  # items hold a result or a link-down marker

    def put(self, item: Any, final: bool, now: float) -> None:
        self.items.append(item)
        self.final = self.final or final
        waiter = self.waiter
        if waiter is not None and (final or self.until is None or now >= self.until) and not waiter.done():
            waiter.set_result(None)

    def ready(self, now: float) -> bool:
        return self.final or bool(self.items and (self.until is None or now >= self.until))

    async def wait(self) -> None:
        self.waiter = asyncio.get_running_loop().create_future()
        try:
            await self.waiter
        finally:
            self.waiter = None


class ReplicaLink:
    """See module docstring."""

    def __init__(
        self,
        target: str,
        channel_factory: Callable[[str], grpc.aio.Channel],
        *,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        self.target = target
        self._channel_factory = channel_factory
        self.breaker = breaker or CircuitBreaker(failure_threshold=3, reset_timeout_s=2.0)
        self.load: inference_pb2.LoadReport | None = None
        self.load_at = 0.0
        self.in_flight = 0
        self.submitted = 0
        self._inboxes: dict[str, _Inbox] = {}
        self._call: Any = None
        self._connected = asyncio.Event()
        self._writing = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    # -- lifecycle --------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._maintain(), name=f"replica-link-{self.target}")

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    @property
    def available(self) -> bool:
        """Candidate for new work: connected, breaker not open, not draining."""
        draining = self.load is not None and self.load.draining
        return self.connected and self.breaker.state is not BreakerState.OPEN and not draining

    def load_score(self) -> int:
        """Requests on the replica as far as we know: its last report or our own count, the larger."""
        reported = (self.load.running + self.load.waiting) if self.load is not None else 0
        return max(reported, self.in_flight)

    async def wait_connected(self, within_s: float) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._connected.wait(), within_s)
        return self.connected

    async def _maintain(self) -> None:
        attempt = 0
        while not self._closed:
            channel = self._channel_factory(self.target)
            try:
                self._call = inference_pb2_grpc.InferenceServiceStub(channel).Generate()
                first = await self._call.read()  # the replica sends a load report first
                if first is grpc.aio.EOF:
                    raise ConnectionError("stream ended")
                self._connected.set()
                attempt = 0
                log.info("connected to inference replica %s", self.target)
                self._dispatch(first)
                while True:
                    frame = await self._call.read()
                    if frame is grpc.aio.EOF:
                        raise ConnectionError("stream ended")
                    self._dispatch(frame)
            except asyncio.CancelledError:
                raise
            except (grpc.aio.AioRpcError, ConnectionError) as exc:
                why = exc.code().name if isinstance(exc, grpc.aio.AioRpcError) else str(exc)
                if self._connected.is_set():
                    log.warning("lost inference replica %s: %s", self.target, why)
                    self.breaker.record_failure()
                self._link_down(why)
            finally:
                self._connected.clear()
                await channel.close()
            attempt += 1
            await asyncio.sleep(0.05 + full_jitter_backoff(attempt, base_s=0.1, cap_s=2.0))

    def _dispatch(self, frame: inference_pb2.GenerateResponse) -> None:
        if frame.HasField("load"):
            self.load = frame.load
            self.load_at = time.monotonic()
        now = time.monotonic()
        for delta in frame.deltas:
            inbox = self._inboxes.get(delta.request_id)
            if inbox is not None:
                inbox.put(delta, delta.HasField("result"), now)

    def _link_down(self, why: str) -> None:
        for inbox in self._inboxes.values():
            inbox.put((_LINK_DOWN, why), True, 0.0)

    # -- requests ---------------------------------------------------------

    async def generate(
        self, submit: inference_pb2.SubmitGeneration, hold_s: float = 0.0
    ) -> AsyncGenerator[inference_pb2.GenerationDelta, None]:
        """Stream one request's deltas; after each, the next comes at least ``hold_s`` later, merged (see module
        docstring), except the last.
        Raises ReplicaDown if the link fails before the end."""
        if not self.connected:
            raise ReplicaDown(self.target, "not connected")
        rid = submit.request_id
        inbox = _Inbox()
        self._inboxes[rid] = inbox
        self.in_flight += 1
        finished = False
        try:
            try:
                async with self._writing:
                    await self._call.write(inference_pb2.GenerateRequest(submit=submit))
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError, AttributeError) as exc:
                raise ReplicaDown(self.target, f"write failed: {exc}") from None
            self.submitted += 1
            while True:
                if not inbox.ready(time.monotonic()):
                    await inbox.wait()
                item = inbox.items[0]
                if isinstance(item, tuple) and item and item[0] is _LINK_DOWN:
                    raise ReplicaDown(self.target, item[1])
                delta, inbox.items = _merge(inbox.items)
                inbox.final = bool(inbox.items)  # only a link-down marker can follow an unfinished delta
                finished = delta.HasField("result")
                yield delta
                if finished:
                    return
                inbox.until = time.monotonic() + hold_s if hold_s > 0 else None
        finally:
            self.in_flight -= 1
            self._inboxes.pop(rid, None)
            if not finished and self.connected:
                with contextlib.suppress(Exception):
                    async with self._writing:
                        await self._call.write(
                            inference_pb2.GenerateRequest(abort=inference_pb2.AbortGeneration(request_id=rid))
                        )
