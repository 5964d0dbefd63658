"""Sessions as event logs in Redis Streams, scoped by tenant, expiring after a TTL.

Keys (one hash tag per session, so a Redis Cluster keeps them on one shard)::

    agentmesh:session:{<tenant>:<session>}:meta    hash: created_at, system_prompt, v
    agentmesh:session:{<tenant>:<session>}:events  stream: an entry per event, fields v (version), e (JSON)
    agentmesh:session:{<tenant>:<session>}:turns   set: turn ids already appended

A turn is appended when it completes, all its events at once, by one Lua
script that first checks the turn id: a retried turn id is never appended
twice (the script returns 0 and the caller replays the recorded turn instead).
Each append refreshes the TTL of all three keys. Any router replica rebuilds a
session from its stream. Event types (schema v1): ``user_message``, ``plan``,
``tool_call``, ``tool_result``, ``answer``, ``usage``, ``turn_completed``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis

from services.runtime.errors import InvalidArgument
from services.runtime.tenancy import check_tenant

SCHEMA_VERSION = 1

APPEND_TURN = """
if redis.call('SISMEMBER', KEYS[3], ARGV[1]) == 1 then return 0 end
redis.call('HSETNX', KEYS[1], 'created_at', ARGV[3])
redis.call('HSETNX', KEYS[1], 'system_prompt', ARGV[4])
redis.call('HSETNX', KEYS[1], 'v', ARGV[5])
for i = 6, #ARGV do
  redis.call('XADD', KEYS[2], '*', 'v', ARGV[5], 'e', ARGV[i])
end
redis.call('SADD', KEYS[3], ARGV[1])
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ARGV[2]) end
return 1
"""


@dataclass
class ToolRecord:
    call_id: str
    tool_name: str
    arguments_json: str
    status: int = 0
    output_json: str = ""
    error_message: str = ""
    latency_s: float = 0.0
    cached: bool = False


@dataclass
class TurnRecord:
    turn_id: str
    user_message: str
    answer: str = ""
    tool_calls: list[ToolRecord] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    finish_reason: int = 0
    completed_at: float = 0.0

    def events(self) -> list[dict[str, Any]]:
        """This turn as schema-v1 events, in order."""
        out: list[dict[str, Any]] = [{"type": "user_message", "turn_id": self.turn_id, "text": self.user_message}]
        if self.tool_calls:
            out.append(
                {
                    "type": "plan",
                    "turn_id": self.turn_id,
                    "tool_calls": [[t.tool_name, t.arguments_json] for t in self.tool_calls],
                }
            )
        for t in self.tool_calls:
            out.append(
                {
                    "type": "tool_call",
                    "turn_id": self.turn_id,
                    "call_id": t.call_id,
                    "name": t.tool_name,
                    "arguments": t.arguments_json,
                }
            )
            out.append(
                {
                    "type": "tool_result",
                    "turn_id": self.turn_id,
                    "call_id": t.call_id,
                    "status": t.status,
                    "output": t.output_json,
                    "error": t.error_message,
                    "latency_s": t.latency_s,
                    "cached": t.cached,
                }
            )
        out.append({"type": "answer", "turn_id": self.turn_id, "text": self.answer})
        out.append({"type": "usage", "turn_id": self.turn_id, **self.usage, "finish_reason": self.finish_reason})
        out.append({"type": "turn_completed", "turn_id": self.turn_id, "at": self.completed_at})
        return out


@dataclass
class Session:
    tenant: str
    session_id: str
    system_prompt: str
    created_at: float
    turns: list[TurnRecord] = field(default_factory=list)
    ttl_s: float = 0.0

    def turn(self, turn_id: str) -> TurnRecord | None:
        return next((t for t in self.turns if t.turn_id == turn_id), None)


def _fold(events: list[dict[str, Any]]) -> list[TurnRecord]:
    turns: dict[str, TurnRecord] = {}
    calls: dict[tuple[str, str], ToolRecord] = {}
    for e in events:
        tid = e.get("turn_id", "")
        kind = e.get("type")
        if kind == "user_message":
            turns[tid] = TurnRecord(turn_id=tid, user_message=e["text"])
            continue
        turn = turns.get(tid)
        if turn is None:
            continue
        if kind == "tool_call":
            record = ToolRecord(e["call_id"], e["name"], e["arguments"])
            calls[(tid, e["call_id"])] = record
            turn.tool_calls.append(record)
        elif kind == "tool_result" and (tid, e["call_id"]) in calls:
            record = calls[(tid, e["call_id"])]
            record.status, record.output_json, record.error_message = e["status"], e["output"], e["error"]
            record.latency_s, record.cached = e["latency_s"], e["cached"]
        elif kind == "answer":
            turn.answer = e["text"]
        elif kind == "usage":
            turn.usage = {k: int(e.get(k, 0)) for k in ("prompt_tokens", "completion_tokens", "cached_prompt_tokens")}
            turn.finish_reason = int(e.get("finish_reason", 0))
        elif kind == "turn_completed":
            turn.completed_at = float(e.get("at", 0.0))
    return [t for t in turns.values() if t.completed_at]


def session_keys(prefix: str, tenant: str, session_id: str) -> tuple[str, str, str]:
    """The session's three keys; injective in (tenant, session_id).

    A tenant name holds no ``:`` (``tenancy.check_tenant``), so the first ``:`` in
    the hash tag ends it, whatever ``:`` the session id holds; braces are refused
    in both, since they would end the hash tag (ValueError for a tenant, which the
    interceptor has checked already; InvalidArgument for a caller's session id).
    """
    check_tenant(tenant)
    if "{" in session_id or "}" in session_id:
        raise InvalidArgument.field("session_id", "must not contain braces")
    base = f"{prefix}{{{tenant}:{session_id}}}"
    return f"{base}:meta", f"{base}:events", f"{base}:turns"


class SessionStore:
    """Reads and appends sessions (see module docstring)."""

    def __init__(self, redis: aioredis.Redis, ttl_s: float = 86_400.0, prefix: str = "agentmesh:session:") -> None:
        self._redis = redis
        self.ttl_s = ttl_s
        self._prefix = prefix
        self._append = redis.register_script(APPEND_TURN)

    def _keys(self, tenant: str, session_id: str) -> tuple[str, str, str]:
        return session_keys(self._prefix, tenant, session_id)

    async def load(self, tenant: str, session_id: str) -> Session | None:
        meta_key, events_key, _ = self._keys(tenant, session_id)
        pipe = self._redis.pipeline()
        pipe.hgetall(meta_key)
        pipe.xrange(events_key)
        pipe.pttl(events_key)
        meta, entries, ttl_ms = await pipe.execute()
        if not meta:
            return None
        events = []
        for _, fields in entries:
            if int(fields.get(b"v", b"1")) > SCHEMA_VERSION:
                continue  # written by a newer router; skip what we cannot read
            events.append(json.loads(fields[b"e"]))
        return Session(
            tenant=tenant,
            session_id=session_id,
            system_prompt=meta.get(b"system_prompt", b"").decode(),
            created_at=float(meta.get(b"created_at", b"0")),
            turns=_fold(events),
            ttl_s=max(0, int(ttl_ms)) / 1000 if ttl_ms and ttl_ms > 0 else 0.0,
        )

    async def append_turn(self, session: Session, turn: TurnRecord) -> bool:
        """Append a completed turn; False if this turn id was already recorded."""
        keys = self._keys(session.tenant, session.session_id)
        payloads = [json.dumps(e, separators=(",", ":")) for e in turn.events()]
        args: list[str | int | float] = [
            turn.turn_id,
            int(self.ttl_s * 1000),
            session.created_at or time.time(),
            session.system_prompt,
            SCHEMA_VERSION,
            *payloads,
        ]
        return bool(await self._append(keys=list(keys), args=args))
