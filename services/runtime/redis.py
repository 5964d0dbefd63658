"""Connecting to Redis at start-up, failing with one clear line when it is required."""

from __future__ import annotations

import logging

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from services.runtime.server import StartupError

log = logging.getLogger(__name__)


async def connect_redis(url: str, *, required: bool, timeout_s: float = 2.0) -> aioredis.Redis | None:
    """A pinged Redis client for ``url``.

    Unreachable and required: StartupError. Unreachable and optional: a warning
    and None, so the caller runs without the features Redis backs.
    """
    client = aioredis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        await client.aclose()
        message = f"Redis at {url} is unreachable: {exc}"
        if required:
            raise StartupError(message) from None
        log.warning("%s; continuing without it", message)
        return None
    return client
