"""Circuit breaker, backoff and the two-level cache."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from services.runtime.cache import LruTtlCache, TwoLevelCache, cache_key
from services.runtime.resilience import BreakerState, CircuitBreaker, full_jitter_backoff


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_breaker_opens_half_opens_and_closes() -> None:
    clock = FakeClock()
    changes: list[BreakerState] = []
    breaker = CircuitBreaker(failure_threshold=3, reset_timeout_s=5, clock=clock, on_change=changes.append)
    for _ in range(2):
        assert breaker.allow()
        breaker.record_failure()
    assert breaker.state is BreakerState.CLOSED
    breaker.record_failure()
    assert breaker.state is BreakerState.OPEN  # type: ignore[comparison-overlap]
    assert not breaker.allow()
    assert breaker.retry_after_s() == pytest.approx(5)
    clock.now += 5
    assert breaker.state is BreakerState.HALF_OPEN
    assert breaker.allow() and not breaker.allow()  # one probe at a time
    breaker.record_failure()
    assert breaker.state is BreakerState.OPEN
    clock.now += 5
    assert breaker.allow()
    breaker.record_success()
    assert breaker.state is BreakerState.CLOSED
    assert changes == [
        BreakerState.OPEN,
        BreakerState.HALF_OPEN,
        BreakerState.OPEN,
        BreakerState.HALF_OPEN,
        BreakerState.CLOSED,
    ]


def test_success_resets_the_failure_count() -> None:
    breaker = CircuitBreaker(failure_threshold=2, clock=FakeClock())
    breaker.record_failure()
    breaker.record_success()
    breaker.record_failure()
    assert breaker.state is BreakerState.CLOSED


def test_full_jitter_is_bounded_by_the_capped_exponential() -> None:
    assert full_jitter_backoff(1, base_s=0.1, rng=lambda: 1.0) == pytest.approx(0.1)
    assert full_jitter_backoff(4, base_s=0.1, rng=lambda: 1.0) == pytest.approx(0.8)
    assert full_jitter_backoff(30, base_s=0.1, cap_s=2, rng=lambda: 1.0) == pytest.approx(2)
    assert full_jitter_backoff(3, rng=lambda: 0.0) == 0


def test_lru_ttl_expires_and_evicts() -> None:
    clock = FakeClock()
    cache = LruTtlCache(max_entries=2, clock=clock)
    cache.set("a", b"1", ttl_s=10)
    cache.set("b", b"2", ttl_s=1)
    assert cache.get("a") == b"1"  # a is now most recent
    cache.set("c", b"3", ttl_s=10)
    assert cache.get("b") is None and cache.get("a") == b"1"
    clock.now += 11
    assert cache.get("a") is None and len(cache) == 0  # expired entries are not counted


def test_cache_key_is_canonical() -> None:
    assert cache_key("t", {"a": 1, "b": [1, 2]}) == cache_key("t", {"b": [1, 2], "a": 1})
    assert cache_key("t", {"a": 1}) != cache_key("t", {"a": 2})


async def test_two_level_cache_fills_l1_from_redis(redis_client: aioredis.Redis) -> None:
    writer = TwoLevelCache("test:", redis_client)
    reader = TwoLevelCache("test:", redis_client)
    assert await reader.get("k") == (None, "miss")
    await writer.set("k", b"value", ttl_s=30)
    assert await reader.get("k") == (b"value", "l2")
    assert await reader.get("k") == (b"value", "l1")
    ttl = await redis_client.pttl("test:k")
    assert 0 < ttl <= 30_000
