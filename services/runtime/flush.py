"""Flush ticks: when held stream text goes out, the same instants for every request of a process.

A stream that relays text at a bounded rate holds it between sends. If every
request kept its own timer, a process relaying many requests would wake, and
send a message, once per request per interval; with shared ticks the held text
of all of them leaves at the same instants, in the same loop turn, so a
multiplexed stream carries it in one message.
"""

from __future__ import annotations

import math


def next_tick(now: float, interval_s: float) -> float:
    """When a hold that starts at ``now`` ends: the first multiple of ``interval_s`` (on the monotonic clock)
    at least ``interval_s / 2`` away, so holds last ``interval_s`` on average and end together."""
    return (math.floor((now + interval_s / 2) / interval_s) + 1) * interval_s
