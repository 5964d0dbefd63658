"""Resilience primitives shared by the services: circuit breaker and retry backoff.

The breaker is a plain state machine over a monotonic clock (injectable for
tests)::

    CLOSED ──failure_threshold consecutive failures──▶ OPEN
    OPEN ──reset_timeout_s elapsed──▶ HALF_OPEN (lets half_open_max_calls probes through)
    HALF_OPEN ──a probe succeeds──▶ CLOSED      HALF_OPEN ──a probe fails──▶ OPEN

Backoff is "full jitter" (a uniform draw from 0 to the capped exponential),
which spreads retries of many callers instead of synchronising them.
"""

from __future__ import annotations

import enum
import random
import time
from collections.abc import Callable


class BreakerState(enum.IntEnum):
    """Exported as a metric: 0 closed, 1 half-open, 2 open."""

    CLOSED = 0
    HALF_OPEN = 1
    OPEN = 2


class CircuitBreaker:
    """See module docstring. Not thread-safe: one event loop owns it."""

    def __init__(
        self,
        *,
        failure_threshold: int = 5,
        reset_timeout_s: float = 10.0,
        half_open_max_calls: int = 1,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[BreakerState], None] | None = None,
    ) -> None:
        self.failure_threshold = failure_threshold
        self.reset_timeout_s = reset_timeout_s
        self.half_open_max_calls = half_open_max_calls
        self._clock = clock
        self._on_change = on_change
        self._state = BreakerState.CLOSED
        self._failures = 0
        self._opened_at = 0.0
        self._probes = 0

    @property
    def state(self) -> BreakerState:
        if self._state is BreakerState.OPEN and self._clock() - self._opened_at >= self.reset_timeout_s:
            self._set(BreakerState.HALF_OPEN)
            self._probes = 0
        return self._state

    def retry_after_s(self) -> float:
        """Time until an open breaker lets a probe through (0 if it is not open)."""
        if self.state is not BreakerState.OPEN:
            return 0.0
        return max(0.0, self.reset_timeout_s - (self._clock() - self._opened_at))

    def allow(self) -> bool:
        """May a call go ahead now? In HALF_OPEN this takes one of the probe slots."""
        state = self.state
        if state is BreakerState.CLOSED:
            return True
        if state is BreakerState.HALF_OPEN and self._probes < self.half_open_max_calls:
            self._probes += 1
            return True
        return False

    def record_success(self) -> None:
        self._failures = 0
        if self._state is not BreakerState.CLOSED:
            self._set(BreakerState.CLOSED)

    def record_failure(self) -> None:
        self._failures += 1
        if self._state is BreakerState.HALF_OPEN or self._failures >= self.failure_threshold:
            self._opened_at = self._clock()
            self._set(BreakerState.OPEN)

    def _set(self, state: BreakerState) -> None:
        if state is not self._state:
            self._state = state
            if self._on_change is not None:
                self._on_change(state)


def full_jitter_backoff(
    attempt: int, *, base_s: float = 0.05, cap_s: float = 2.0, rng: Callable[[], float] = random.random
) -> float:
    """Delay before retry number ``attempt`` (1-based): uniform in [0, min(cap, base·2^(attempt-1))]."""
    return float(rng() * min(cap_s, base_s * 2 ** (attempt - 1)))
