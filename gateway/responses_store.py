"""Stored responses: a response id → its tenant's session and turn in the mesh's session log, in Redis.

Why a key rather than an id that encodes the session: a response must stop being retrievable when it is
deleted or was created with ``store: false``, and a session log has no per-turn delete (it is the
conversation later responses continue). So a stored response is one small tenant-scoped key,
``agentmesh:responses:{tenant}:{response id}``, holding the session id and turn id — the state itself, what
``previous_response_id`` continues, stays the session's event log, shared by every router and gateway and
kept across restarts — plus what the log does not keep: the response object as it was answered (its
``function_call`` arguments, ``metadata``, the request's echoed fields; GetSession's tool calls carry no
arguments) and its input items. The key expires with the session store's TTL (``--http-responses-ttl-s``,
the router's ``--session-ttl-s`` by default), and the edge also reads the turn from the session log before
answering, so a response whose session expired or was trimmed away is gone too.

The tenant is the one the gateway's own key table gives the caller's bearer key, looked up only after the
gRPC call that carried the same key was authenticated by the gRPC path. ``MemoryResponseRecords`` is for a
gateway without Redis (one replica, lost on restart) and for unit tests.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import redis.asyncio as aioredis

from gateway.auth import bearer_token

KEY_PREFIX = "agentmesh:responses:"
#: The router's default ``--session-ttl-s``.
DEFAULT_TTL_S = 86_400.0


@dataclass
class StoredResponse:
    """One stored response: where its turn is in the session log, and what the log does not hold."""

    session_id: str
    turn_id: str
    response: dict[str, Any]
    input_items: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> StoredResponse:
        value = json.loads(text)
        return cls(value["session_id"], value["turn_id"], value["response"], value.get("input_items", []))


class ResponseRecords(Protocol):
    """Where stored responses live, by tenant and response id."""

    async def put(self, tenant: str, response_id: str, stored: StoredResponse, ttl_s: float) -> None: ...

    async def get(self, tenant: str, response_id: str) -> StoredResponse | None: ...

    async def delete(self, tenant: str, response_id: str) -> bool: ...


class RedisResponseRecords:
    """Stored responses in Redis, one key each, expiring with the session store's TTL."""

    def __init__(self, redis: aioredis.Redis, prefix: str = KEY_PREFIX) -> None:
        self._redis = redis
        self._prefix = prefix

    def _key(self, tenant: str, response_id: str) -> str:
        return f"{self._prefix}{tenant}:{response_id}"

    async def put(self, tenant: str, response_id: str, stored: StoredResponse, ttl_s: float) -> None:
        await self._redis.set(self._key(tenant, response_id), stored.to_json(), px=max(1, int(ttl_s * 1000)))

    async def get(self, tenant: str, response_id: str) -> StoredResponse | None:
        raw = await self._redis.get(self._key(tenant, response_id))
        return None if raw is None else StoredResponse.from_json(raw)

    async def delete(self, tenant: str, response_id: str) -> bool:
        return bool(await self._redis.delete(self._key(tenant, response_id)))


class MemoryResponseRecords:
    """Stored responses in this process (no expiry): a gateway without Redis, and tests."""

    def __init__(self) -> None:
        self._items: dict[tuple[str, str], str] = {}

    async def put(self, tenant: str, response_id: str, stored: StoredResponse, ttl_s: float) -> None:
        self._items[(tenant, response_id)] = stored.to_json()

    async def get(self, tenant: str, response_id: str) -> StoredResponse | None:
        raw = self._items.get((tenant, response_id))
        return None if raw is None else StoredResponse.from_json(raw)

    async def delete(self, tenant: str, response_id: str) -> bool:
        return self._items.pop((tenant, response_id), None) is not None


@dataclass(frozen=True)
class ResponseStore:
    """The records, the TTL, and how a caller's bearer key names its tenant (the gateway's key table)."""

    records: ResponseRecords
    tenant_for_key: Callable[[str], str | None]
    ttl_s: float = DEFAULT_TTL_S

    def tenant(self, authorization: str) -> str | None:
        token = bearer_token([("authorization", authorization)])
        return None if token is None else self.tenant_for_key(token)
