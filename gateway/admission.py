"""Priority admission with SLO-aware shedding under an adaptive concurrency limit.

Requests hold a slot from admission until their turn (or completion) ends.
While slots are free and nobody of the same or a higher class waits, a request
goes straight in. Otherwise it queues in its class (P0 before P1 before P2,
FIFO within a class) after a check: its expected wait — the requests ahead of
it times the mean service time, divided by the limit — must fit its class's
queue-wait SLO, or it is shed at once with RESOURCE_EXHAUSTED and a retry hint.
A queued request that outlives its SLO is shed then; one whose client left is
dropped (its future is cancelled). When a higher class joins the queue, lower
classes whose expected wait no longer fits are shed: lowest class first.

The limit adapts (AIMD) to downstream signals: each finished request reports
its time to first token; above ``ttft_target_s`` the limit shrinks by 10 %,
otherwise it grows by 1/limit. (Replica load reports do not reach the gateway,
so queueing in the engines shows up here only through TTFT.)
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client import Counter, Gauge, Histogram

from services.runtime.errors import ResourceExhausted
from services.runtime.metrics import LATENCY_BUCKETS, Metrics

CLASSES = (0, 1, 2)
NAMES = {0: "P0", 1: "P1", 2: "P2"}


class AdmissionMetrics:
    def __init__(self, metrics: Metrics) -> None:
        ns, reg = metrics.namespace, metrics.registry
        self.decisions = Counter(
            "gateway_admission", "Admission outcomes by class.", ["priority", "outcome"], namespace=ns, registry=reg
        )
        self.queued = Gauge(
            "gateway_queue_depth", "Requests waiting, by class.", ["priority"], namespace=ns, registry=reg
        )
        self.wait = Histogram(
            "gateway_queue_wait_seconds",
            "Time waited before admission.",
            ["priority"],
            namespace=ns,
            registry=reg,
            buckets=LATENCY_BUCKETS,
        )
        self.limit = Gauge(
            "gateway_concurrency_limit", "Current adaptive concurrency limit.", namespace=ns, registry=reg
        )
        self.in_flight = Gauge("gateway_in_flight", "Admitted requests not yet finished.", namespace=ns, registry=reg)


@dataclass
class _Waiter:
    priority: int
    enqueued: float
    future: asyncio.Future[None]


@dataclass
class Ticket:
    """An admitted request; give it back with ``release``."""

    priority: int
    admitted: float
    released: bool = field(default=False)


class AdmissionController:
    def __init__(
        self,
        slo_s: dict[int, float],
        *,
        initial_limit: float = 8,
        min_limit: float = 1,
        max_limit: float = 256,
        ttft_target_s: float = 2.0,
        service_time_s: float = 1.0,
        metrics: AdmissionMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.slo_s = slo_s
        self.limit = initial_limit
        self.min_limit, self.max_limit = min_limit, max_limit
        self.ttft_target_s = ttft_target_s
        self.service_time_s = service_time_s
        self.in_flight = 0
        self._queues: dict[int, deque[_Waiter]] = {c: deque() for c in CLASSES}
        self._metrics = metrics
        self._clock = clock
        self._publish()

    def queued(self, priority: int | None = None) -> int:
        if priority is None:
            return sum(len(q) for q in self._queues.values())
        return len(self._queues[priority])

    def _ahead(self, priority: int) -> int:
        return sum(len(self._queues[c]) for c in CLASSES if c <= priority)

    def expected_wait_s(self, position: int) -> float:
        """Expected wait of the request at queue ``position`` (1 = next)."""
        return position * self.service_time_s / max(self.limit, 1e-9)

    async def acquire(self, priority: int) -> Ticket:
        """Admit, queue or shed (ResourceExhausted). Cancelling the caller drops it from the queue."""
        now = self._clock()
        if self.in_flight < int(self.limit) and self._ahead(priority) == 0:
            return self._admit(priority, now, waited=0.0)
        expected = self.expected_wait_s(self._ahead(priority) + 1)
        slo = self.slo_s[priority]
        if expected > slo:
            self._count(priority, "shed")
            raise ResourceExhausted(
                f"{NAMES[priority]} request shed: expected queue wait {expected:.1f}s exceeds its {slo:g}s SLO",
                retry_after_s=max(0.1, expected - slo),
                reason="SHED",
            )
        waiter = _Waiter(priority, now, asyncio.get_running_loop().create_future())
        self._queues[priority].append(waiter)
        self._count(priority, "queued")
        self._shed_lower(priority)
        self._publish()
        try:
            async with asyncio.timeout(slo):
                await waiter.future
        except TimeoutError:
            self._remove(waiter)
            self._count(priority, "shed")
            raise ResourceExhausted(
                f"{NAMES[priority]} request shed: waited longer than its {slo:g}s SLO",
                retry_after_s=self.expected_wait_s(self._ahead(priority) + 1),
                reason="SHED",
            ) from None
        except asyncio.CancelledError:
            if not self._remove(waiter) and waiter.future.done() and not waiter.future.cancelled():
                self.in_flight -= 1  # admitted just as the client left: give the slot back
                self._dispatch()
            self._count(priority, "dropped")
            raise
        return self._admit(priority, waiter.enqueued, waited=self._clock() - waiter.enqueued, counted=True)

    def _admit(self, priority: int, since: float, waited: float, counted: bool = False) -> Ticket:
        if not counted:
            self.in_flight += 1
        self._count(priority, "admitted")
        if self._metrics is not None:
            self._metrics.wait.labels(NAMES[priority]).observe(waited)
        self._publish()
        return Ticket(priority, self._clock())

    def release(self, ticket: Ticket, ttft_s: float | None = None) -> None:
        if ticket.released:
            return
        ticket.released = True
        self.in_flight -= 1
        elapsed = self._clock() - ticket.admitted
        self.service_time_s = 0.8 * self.service_time_s + 0.2 * max(elapsed, 0.001)
        if ttft_s is not None:
            if ttft_s > self.ttft_target_s:
                self.limit = max(self.min_limit, self.limit * 0.9)
            else:
                self.limit = min(self.max_limit, self.limit + 1 / self.limit)
        self._dispatch()

    def _dispatch(self) -> None:
        while self.in_flight < int(self.limit):
            waiter = next((q.popleft() for c in CLASSES if (q := self._queues[c])), None)
            if waiter is None:
                break
            if waiter.future.done():
                continue
            self.in_flight += 1
            waiter.future.set_result(None)
        self._publish()

    def _shed_lower(self, arrived: int) -> None:
        """A higher class arrived: shed lower-class waiters whose wait no longer fits, lowest class first."""
        now = self._clock()
        for c in reversed(CLASSES):
            if c <= arrived:
                break
            queue = self._queues[c]
            for i, waiter in enumerate(list(queue)):
                position = self._ahead(c - 1) + i + 1
                if (
                    self.expected_wait_s(position) > self.slo_s[c] - (now - waiter.enqueued)
                    and not waiter.future.done()
                ):
                    queue.remove(waiter)
                    waiter.future.set_exception(
                        ResourceExhausted(
                            f"{NAMES[c]} request shed for higher-priority traffic",
                            retry_after_s=self.expected_wait_s(position),
                            reason="SHED",
                        )
                    )
                    self._count(c, "shed")

    def _remove(self, waiter: _Waiter) -> bool:
        try:
            self._queues[waiter.priority].remove(waiter)
        except ValueError:
            return False
        self._publish()
        return True

    def _count(self, priority: int, outcome: str) -> None:
        if self._metrics is not None:
            self._metrics.decisions.labels(NAMES[priority], outcome).inc()

    def _publish(self) -> None:
        if self._metrics is None:
            return
        for c in CLASSES:
            self._metrics.queued.labels(NAMES[c]).set(len(self._queues[c]))
        self._metrics.limit.set(self.limit)
        self._metrics.in_flight.set(self.in_flight)
