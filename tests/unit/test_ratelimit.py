"""The Redis rate limiter: gateway replicas share one budget per tenant, whatever their clocks say."""

from __future__ import annotations

import time

import pytest
import redis.asyncio as aioredis

from gateway.ratelimit import Decision, Limits, RedisRateLimiter

MACHINE_CLOCK = time.time
SKEW_S = 3600.0  # one replica's clock an hour ahead: NTP gone wrong
# Refill so slow that the test's own run time cannot earn a request back.
LIMITS = Limits(rps=0.01, burst=2, tokens_per_min=60_000, token_burst=20_000, window_s=60, window_max=100)


async def check_on(
    limiter: RedisRateLimiter, skew_s: float, monkeypatch: pytest.MonkeyPatch, tenant: str = "acme"
) -> Decision:
    """One check made on a replica whose clock is ``skew_s`` off the machine's."""
    monkeypatch.setattr(time, "time", lambda: MACHINE_CLOCK() + skew_s)
    try:
        return await limiter.check(tenant)
    finally:
        monkeypatch.setattr(time, "time", MACHINE_CLOCK)


async def test_replicas_with_skewed_clocks_share_one_budget(
    redis_client: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    on_time, ahead = RedisRateLimiter(redis_client, LIMITS), RedisRateLimiter(redis_client, LIMITS)
    decisions = []
    for _ in range(4):
        decisions.append(await check_on(on_time, 0.0, monkeypatch))
        decisions.append(await check_on(ahead, SKEW_S, monkeypatch))
        decisions.append(await check_on(on_time, -SKEW_S, monkeypatch))
    assert sum(d.allowed for d in decisions) == LIMITS.burst, [d.allowed for d in decisions]
    rejected = [d for d in decisions if not d.allowed]
    assert all(0 < d.retry_after_s <= 1 / LIMITS.rps for d in rejected), rejected


async def test_charged_tokens_block_every_replica(redis_client: aioredis.Redis) -> None:
    limits = Limits(rps=100, burst=100, tokens_per_min=60, token_burst=100, window_s=60, window_max=100)
    first, second = RedisRateLimiter(redis_client, limits), RedisRateLimiter(redis_client, limits)
    assert (await first.check("acme")).allowed
    await first.charge("acme", 150)  # the balance goes 50 tokens negative
    blocked = await second.check("acme")
    assert not blocked.allowed and blocked.retry_after_s > 50  # 1 token a second: ~51 s to get back above zero
    assert (await second.check("other-tenant")).allowed
