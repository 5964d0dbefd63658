"""One long-lived, multiplexed Generate stream to one inference replica.

In: ``generate(submit)`` from any number of concurrent turns. Out: that
request's ``GenerationDelta``s, in order, ending with the one that carries the
result. A reader task dispatches each frame's deltas to per-request queues
and keeps the replica's latest load report. If the stream breaks, every
request on it fails with ``ReplicaDown`` (so the caller can fail over) and the
link reconnects with backoff. A consumer that falls behind gets the deltas
queued for it merged into one, so a slow relay sends fewer, larger messages.
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


def _coalesce(
    first: inference_pb2.GenerationDelta, queue: asyncio.Queue[Any]
) -> tuple[inference_pb2.GenerationDelta, Any]:
    """Merge the deltas already queued behind ``first`` (a consumer that fell behind catches up in one
    message, not one per engine step); returns the merged delta and an item it must not merge (link down)."""
    texts, count = [first.text], first.token_count
    result: inference_pb2.GenerationResult | None = None
    leftover: Any = None
    while result is None and not queue.empty():
        item = queue.get_nowait()
        if isinstance(item, tuple):
            leftover = item
            break
        texts.append(item.text)
        count += item.token_count
        if item.HasField("result"):
            result = item.result
    merged = inference_pb2.GenerationDelta(request_id=first.request_id, text="".join(texts), token_count=count)
    if result is not None:
        merged.result.CopyFrom(result)
    return merged, leftover


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
        self._queues: dict[str, asyncio.Queue[Any]] = {}
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
        for delta in frame.deltas:
            queue = self._queues.get(delta.request_id)
            if queue is not None:
                queue.put_nowait(delta)

    def _link_down(self, why: str) -> None:
        for queue in self._queues.values():
            queue.put_nowait((_LINK_DOWN, why))

    # -- requests ---------------------------------------------------------

    async def generate(
        self, submit: inference_pb2.SubmitGeneration
    ) -> AsyncGenerator[inference_pb2.GenerationDelta, None]:
        """Stream one request's deltas. Raises ReplicaDown if the link fails before the end."""
        if not self.connected:
            raise ReplicaDown(self.target, "not connected")
        rid = submit.request_id
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self._queues[rid] = queue
        self.in_flight += 1
        finished = False
        try:
            try:
                async with self._writing:
                    await self._call.write(inference_pb2.GenerateRequest(submit=submit))
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError, AttributeError) as exc:
                raise ReplicaDown(self.target, f"write failed: {exc}") from None
            self.submitted += 1
            pending: Any = None
            while True:
                item = pending if pending is not None else await queue.get()
                pending = None
                if isinstance(item, tuple) and item and item[0] is _LINK_DOWN:
                    raise ReplicaDown(self.target, item[1])
                delta: inference_pb2.GenerationDelta = item
                if not queue.empty() and not delta.HasField("result"):
                    delta, pending = _coalesce(delta, queue)
                if delta.HasField("result"):
                    finished = True
                yield delta
                if finished:
                    return
        finally:
            self.in_flight -= 1
            self._queues.pop(rid, None)
            if not finished and self.connected:
                with contextlib.suppress(Exception):
                    async with self._writing:
                        await self._call.write(
                            inference_pb2.GenerateRequest(abort=inference_pb2.AbortGeneration(request_id=rid))
                        )
