"""Redis not answering is UNAVAILABLE with a retry hint (the reliability suite's Redis restart), never INTERNAL."""

from __future__ import annotations

import grpc
import pytest
import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError

from gateway.ratelimit import Limits, RedisRateLimiter
from meshkit.up import free_port
from services.router.serving.converse import _as_mesh_error
from services.runtime.errors import Unavailable


async def test_the_rate_limiter_without_redis_refuses_with_a_retry_hint() -> None:
    client = aioredis.Redis.from_url(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=0.5)
    limiter = RedisRateLimiter(client, Limits())
    with pytest.raises(Unavailable) as refused:
        await limiter.check("acme")
    assert refused.value.retry_after_s and refused.value.retry_after_s > 0
    assert "rate-limit store is unreachable" in refused.value.message
    await client.aclose()


def test_a_turn_that_lost_redis_ends_unavailable_not_internal() -> None:
    error = _as_mesh_error(RedisConnectionError("Connection refused"), "t1")
    assert error.code is grpc.StatusCode.UNAVAILABLE
    assert error.retry_after_s is not None and "Connection refused" not in error.message
