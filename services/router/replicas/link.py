"""One long-lived, multiplexed Generate stream to one inference replica.

In: ``generate(submit)`` from any number of concurrent turns. Out: that
request's ``GenerationDelta``s, in order, ending with the one that carries the
result. The stream itself (connect once the replica's first load report
arrives, reconnect with backoff, serialised writes, abort on consumer exit) is
``runtime/mux_client.py``'s; this link adds what is the replica's: the reader
hands each frame's deltas to per-request inboxes and keeps the latest load
report; if the stream breaks, every request on it fails with ``ReplicaDown``
(so the caller can fail over) and the breaker counts it. A consumer that falls behind gets the deltas
queued for it merged into one, so a slow relay sends fewer, larger messages.
Holding text between flush ticks is the replica's (``SubmitGeneration.
flush_interval``): a frame that arrives here is delivered at once.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Callable
from typing import Any

import grpc.aio

from agentmesh.inference.v1 import inference_pb2, inference_pb2_grpc
from services.runtime.errors import Unavailable
from services.runtime.mux_client import Inbox, MuxClient, StreamDown
from services.runtime.resilience import BreakerState, CircuitBreaker


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


class ReplicaLink(MuxClient[inference_pb2.GenerateRequest, inference_pb2.GenerateResponse, Inbox[Any]]):
    """See module docstring."""

    greeting = True  # the replica sends a load report first
    retry_floor_s = 0.05
    peer = "inference replica"

    def __init__(
        self,
        target: str,
        channel_factory: Callable[[str], grpc.aio.Channel],
        *,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        super().__init__(target, channel_factory)
        self.breaker = breaker or CircuitBreaker(failure_threshold=3, reset_timeout_s=2.0)
        self.load: inference_pb2.LoadReport | None = None
        self.load_at = 0.0
        self.submitted = 0

    @property
    def available(self) -> bool:
        """Candidate for new work: connected, breaker not open, not draining."""
        draining = self.load is not None and self.load.draining
        return self.connected and self.breaker.state is not BreakerState.OPEN and not draining

    def load_score(self) -> int:
        """Requests on the replica as far as we know: its last report or our own count, the larger."""
        reported = (self.load.running + self.load.waiting) if self.load is not None else 0
        return max(reported, self.in_flight)

    def open(
        self, channel: grpc.aio.Channel
    ) -> grpc.aio.StreamStreamCall[inference_pb2.GenerateRequest, inference_pb2.GenerateResponse]:
        return inference_pb2_grpc.InferenceServiceStub(channel).Generate()

    def received(self, message: inference_pb2.GenerateResponse) -> None:
        if message.HasField("load"):
            self.load = message.load
            self.load_at = time.monotonic()
        for delta in message.deltas:
            inbox = self._slots.get(delta.request_id)
            if inbox is not None:
                inbox.put(delta)

    def lost(self, why: str, was_connected: bool) -> None:
        if was_connected and not self._closed:
            self.breaker.record_failure()
        for inbox in self._slots.values():
            inbox.put((_LINK_DOWN, why))

    # -- requests ---------------------------------------------------------

    async def generate(
        self, submit: inference_pb2.SubmitGeneration
    ) -> AsyncGenerator[inference_pb2.GenerationDelta, None]:
        """Stream one request's deltas (those queued while the consumer was busy merged into one).
        Raises ReplicaDown if the link fails before the end."""
        rid = submit.request_id
        inbox: Inbox[Any] = Inbox()
        finished = False
        try:
            try:
                await self.submit(rid, inbox, inference_pb2.GenerateRequest(submit=submit))
            except StreamDown as exc:
                raise ReplicaDown(self.target, str(exc)) from None
            self.submitted += 1
            while True:
                if not inbox.items:
                    await inbox.wait()
                item = inbox.items[0]
                if isinstance(item, tuple) and item and item[0] is _LINK_DOWN:
                    raise ReplicaDown(self.target, item[1])
                delta, inbox.items = _merge(inbox.items)
                finished = delta.HasField("result")
                yield delta
                if finished:
                    return
        finally:
            abort = inference_pb2.AbortGeneration(request_id=rid)
            await self.release(rid, None if finished else inference_pb2.GenerateRequest(abort=abort))
