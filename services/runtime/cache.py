"""A two-level cache: L1 in-process LRU with TTL, L2 Redis with TTL.

Used for tool results and deterministic responses. Keys are sha256 hex digests
of canonical inputs (``cache_key``); values are bytes. A read checks L1, then
L2 (and fills L1 on an L2 hit); a write goes to both. Redis being down never
fails a call: L2 errors are logged and counted as misses.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis
from cachetools import TLRUCache
from redis.exceptions import RedisError

log = logging.getLogger(__name__)


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: equal values give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def cache_key(*parts: Any) -> str:
    """sha256 over the canonical JSON of ``parts``."""
    return hashlib.sha256(canonical_json(list(parts)).encode()).hexdigest()


class LruTtlCache:
    """Bounded in-process LRU whose entries also expire, each after its own TTL.

    A thin face over ``cachetools.TLRUCache``: callers pass a TTL per ``set``
    (an L2 hit fills L1 with what is left of the Redis TTL), so the entry's
    deadline is stored beside its value and handed back as the time-to-use.
    Expired entries are dropped before the least recently used one.
    """

    def __init__(self, max_entries: int = 4096, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries = max_entries
        self._data: TLRUCache[str, tuple[bytes, float], float] = TLRUCache(max_entries, _expiry, clock)

    def get(self, key: str) -> bytes | None:
        item = self._data.get(key)
        return None if item is None else item[0]

    def set(self, key: str, value: bytes, ttl_s: float) -> None:
        self._data[key] = (value, ttl_s)

    def __len__(self) -> int:
        return len(self._data)


def _expiry(_key: str, item: tuple[bytes, float], now: float) -> float:
    """TLRUCache's time-to-use: the entry's own TTL from when it was set."""
    return now + item[1]


class TwoLevelCache:
    """See module docstring. ``namespace`` prefixes Redis keys (e.g. "agentmesh:tools:")."""

    def __init__(self, namespace: str, redis: aioredis.Redis | None, l1: LruTtlCache | None = None) -> None:
        self.namespace = namespace
        self._redis = redis
        self.l1 = l1 or LruTtlCache()

    async def get(self, key: str) -> tuple[bytes | None, str]:
        """(value, level) where level is "l1", "l2" or "miss"."""
        value = self.l1.get(key)
        if value is not None:
            return value, "l1"
        if self._redis is None:
            return None, "miss"
        try:
            pipe = self._redis.pipeline()
            pipe.get(self.namespace + key)
            pipe.pttl(self.namespace + key)
            raw, ttl_ms = await pipe.execute()
        except (RedisError, OSError) as exc:
            log.warning("L2 cache read failed: %s", exc)
            return None, "miss"
        if raw is None:
            return None, "miss"
        if isinstance(ttl_ms, int) and ttl_ms > 0:
            self.l1.set(key, bytes(raw), ttl_ms / 1000)
        return bytes(raw), "l2"

    async def set(self, key: str, value: bytes, ttl_s: float) -> None:
        if ttl_s <= 0:
            return
        self.l1.set(key, value, ttl_s)
        if self._redis is None:
            return
        try:
            await self._redis.set(self.namespace + key, value, px=max(1, int(ttl_s * 1000)))
        except (RedisError, OSError) as exc:
            log.warning("L2 cache write failed: %s", exc)
