"""Deadline propagation: every downstream call gets ``timeout=`` from the caller's time.

grpc.aio does not carry a server's incoming deadline onto the calls its handler
makes, so without help a request whose client gave up 5 s ago keeps work
running three hops down. The deadline interceptor records each RPC's absolute
deadline in a contextvar; ``downstream_timeout()`` turns it back into a
relative timeout (minus a small margin so the downstream fails first and its
error, not ours, reaches the caller), and raises ``DeadlineExceeded`` instead of
starting work that cannot finish in time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from services.runtime.context import DEADLINE
from services.runtime.errors import DeadlineExceeded

#: Seconds kept back from each hop so the callee times out before the caller.
DEFAULT_MARGIN_S = 0.01


@dataclass(frozen=True)
class Deadline:
    """An absolute point in ``time.monotonic()`` time, or none."""

    expires_at: float | None

    @classmethod
    def after(cls, seconds: float | None) -> Deadline:
        """A deadline ``seconds`` from now (None: no deadline)."""
        return cls(None if seconds is None else time.monotonic() + seconds)

    @classmethod
    def current(cls) -> Deadline:
        """The deadline of the RPC being served (from the contextvar)."""
        return cls(DEADLINE.get())

    def remaining(self) -> float | None:
        """Seconds left (may be negative), or None without a deadline."""
        return None if self.expires_at is None else self.expires_at - time.monotonic()

    @property
    def expired(self) -> bool:
        left = self.remaining()
        return left is not None and left <= 0

    def earliest(self, other: Deadline) -> Deadline:
        """The sooner of two deadlines."""
        if self.expires_at is None:
            return other
        if other.expires_at is None:
            return self
        return self if self.expires_at <= other.expires_at else other

    def timeout(self, *, cap: float | None = None, margin: float = DEFAULT_MARGIN_S) -> float | None:
        """A ``timeout=`` for a downstream call: remaining time less ``margin``, at most ``cap``.

        Raises DeadlineExceeded when no time is left, so no doomed call is started.
        """
        left = self.remaining()
        if left is None:
            return cap
        left -= margin
        if left <= 0:
            raise DeadlineExceeded("deadline exceeded before the downstream call could start")
        return left if cap is None else min(left, cap)


def downstream_timeout(*, cap: float | None = None, margin: float = DEFAULT_MARGIN_S) -> float | None:
    """``timeout=`` for a call made while serving an RPC: the caller's remaining time."""
    return Deadline.current().timeout(cap=cap, margin=margin)
