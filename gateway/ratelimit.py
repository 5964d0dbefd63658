"""Per-tenant rate limits: token buckets on requests and on tokens, plus a sliding window.

One Lua script does the whole check atomically in Redis, so every gateway
replica shares one budget per tenant:

- request bucket: ``rps`` per second, up to ``burst``; each request takes 1;
- token bucket: ``tokens_per_min`` per minute, up to ``token_burst``; a request
  needs a positive balance, and its prompt + completion tokens are charged when
  it finishes (``charge``) — the balance may go negative, which then blocks
  until it refills;
- sliding window: at most ``window_max`` requests in any ``window_s`` seconds
  (a sorted set of request timestamps).

Time is Redis's own (``TIME`` inside the scripts), never the caller's: replicas
whose clocks disagree would otherwise refill a shared bucket by the skew, or
starve it. Redis 7 replicates scripts by their effects, so a script may read
the clock before writing.

A rejection carries how long to wait (the latest of the three). While Redis
is unreachable, ``check`` raises ``Unavailable`` with a retry hint: turns are
refused with a clear status (fail closed, no budget is guessed) and admitted
again as soon as Redis answers, without restarting the gateway. The
in-process ``MemoryRateLimiter`` has the same rules and is used only when
configured explicitly (``--rate-limit-backend memory``): it does not share a
budget across replicas.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from services.runtime.errors import Unavailable

CHECK = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local rps, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local tpm, tburst = tonumber(ARGV[3]), tonumber(ARGV[4])
local window, wmax = tonumber(ARGV[5]), tonumber(ARGV[6])
local member, ttl = ARGV[7], tonumber(ARGV[8])

local r = redis.call('HMGET', KEYS[1], 'req', 'tok', 'ts')
local req = tonumber(r[1]) or burst
local tok = tonumber(r[2]) or tburst
local ts = tonumber(r[3]) or now
local dt = math.max(0, now - ts)
req = math.min(burst, req + dt * rps)
tok = math.min(tburst, tok + dt * tpm / 60)

redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[2])

local wait = 0
if req < 1 then wait = math.max(wait, (1 - req) / rps) end
if tok <= 0 then wait = math.max(wait, (1 - tok) * 60 / tpm) end
if count >= wmax then
  local oldest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  wait = math.max(wait, tonumber(oldest[2]) + window - now)
end
if wait > 0 then
  redis.call('HSET', KEYS[1], 'req', req, 'tok', tok, 'ts', now)
  redis.call('EXPIRE', KEYS[1], ttl)
  return {0, tostring(wait)}
end
redis.call('HSET', KEYS[1], 'req', req - 1, 'tok', tok, 'ts', now)
redis.call('ZADD', KEYS[2], now, member)
redis.call('EXPIRE', KEYS[1], ttl)
redis.call('EXPIRE', KEYS[2], ttl)
return {1, '0'}
"""

CHARGE = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local tpm, tburst, cost, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local r = redis.call('HMGET', KEYS[1], 'tok', 'ts')
local tok = tonumber(r[1]) or tburst
local ts = tonumber(r[2]) or now
tok = math.min(tburst, tok + math.max(0, now - ts) * tpm / 60) - cost
redis.call('HSET', KEYS[1], 'tok', tok, 'ts', now)
redis.call('EXPIRE', KEYS[1], ttl)
return tostring(tok)
"""


@dataclass(frozen=True)
class Limits:
    rps: float = 10.0
    burst: float = 20.0
    tokens_per_min: float = 60_000.0
    token_burst: float = 20_000.0
    window_s: float = 60.0
    window_max: int = 600


#: Retry hint while the rate-limit store is unreachable.
STORE_DOWN_RETRY_S = 1.0


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after_s: float = 0.0


class RateLimiter(Protocol):
    async def check(self, tenant: str) -> Decision: ...

    async def charge(self, tenant: str, tokens: int) -> None: ...


class RedisRateLimiter:
    def __init__(self, redis: aioredis.Redis, limits: Limits, prefix: str = "agentmesh:ratelimit:") -> None:
        self.limits = limits
        self._prefix = prefix
        self._check = redis.register_script(CHECK)
        self._charge = redis.register_script(CHARGE)
        self._ttl = int(max(limits.window_s, limits.burst / limits.rps, 60)) + 60

    def _keys(self, tenant: str) -> list[str]:
        base = f"{self._prefix}{{{tenant}}}"
        return [f"{base}:buckets", f"{base}:window"]

    async def check(self, tenant: str) -> Decision:
        lim = self.limits
        args = [lim.rps, lim.burst, lim.tokens_per_min, lim.token_burst, lim.window_s, lim.window_max]
        try:
            allowed, wait = await self._check(keys=self._keys(tenant), args=[*args, uuid.uuid4().hex, self._ttl])
        except (RedisError, OSError) as exc:
            raise Unavailable(
                f"the rate-limit store is unreachable ({type(exc).__name__}); retry shortly",
                retry_after_s=STORE_DOWN_RETRY_S,
                reason="RATE_LIMIT_STORE_UNAVAILABLE",
            ) from None
        return Decision(bool(int(allowed)), float(wait))

    async def charge(self, tenant: str, tokens: int) -> None:
        if tokens <= 0:
            return
        lim = self.limits
        args = [lim.tokens_per_min, lim.token_burst, tokens, self._ttl]
        await self._charge(keys=self._keys(tenant)[:1], args=args)


class MemoryRateLimiter:
    """The same rules in process (explicit opt-in: budgets are per gateway replica)."""

    def __init__(self, limits: Limits, clock: Callable[[], float] = time.time) -> None:
        self.limits = limits
        self._clock = clock
        self._state: dict[str, tuple[float, float, float]] = {}
        self._window: dict[str, list[float]] = {}

    def _refill(self, tenant: str, now: float) -> tuple[float, float]:
        lim = self.limits
        req, tok, ts = self._state.get(tenant, (lim.burst, lim.token_burst, now))
        dt = max(0.0, now - ts)
        return min(lim.burst, req + dt * lim.rps), min(lim.token_burst, tok + dt * lim.tokens_per_min / 60)

    async def check(self, tenant: str) -> Decision:
        lim, now = self.limits, self._clock()
        req, tok = self._refill(tenant, now)
        window = [t for t in self._window.get(tenant, []) if t > now - lim.window_s]
        wait = 0.0
        if req < 1:
            wait = max(wait, (1 - req) / lim.rps)
        if tok <= 0:
            wait = max(wait, (1 - tok) * 60 / lim.tokens_per_min)
        if len(window) >= lim.window_max:
            wait = max(wait, window[0] + lim.window_s - now)
        if wait > 0:
            self._state[tenant] = (req, tok, now)
            self._window[tenant] = window
            return Decision(False, wait)
        self._state[tenant] = (req - 1, tok, now)
        self._window[tenant] = [*window, now]
        return Decision(True)

    async def charge(self, tenant: str, tokens: int) -> None:
        now = self._clock()
        req, tok = self._refill(tenant, now)
        self._state[tenant] = (req, tok - tokens, now)
