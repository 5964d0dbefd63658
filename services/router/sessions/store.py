"""Sessions in Redis, scoped by tenant, expiring a TTL after their last turn; a turn reads only recent history.

Keys (one hash tag per session, so a Redis Cluster keeps them on one shard)::

    agentmesh:session:{<tenant>:<session>}:meta     hash: created_at, created_by, system_prompt, v, archived,
                                                    omitted
    agentmesh:session:{<tenant>:<session>}:events   stream: the events of turns not yet archived (v, e)
    agentmesh:session:{<tenant>:<session>}:turns    set: turn ids already appended
    agentmesh:session:{<tenant>:<session>}:archive  stream: one folded turn per entry, id ``<turn number>-0`` (v, t)

A session exists from the moment it is created (``create``: the meta hash),
so a turn retried after its router died finds the session the server chose;
``created_by`` names the turn that created it, so a retry of that turn can
tell the session it created from one that was there before it.
A turn is appended when it completes, all its events at once, by one Lua
script that first checks the turn id: a retried turn id is never appended
twice (the script returns 0 and the caller replays the recorded turn instead).

Compaction keeps reads bounded: once ``compact_after`` turns sit in the events
stream, the next append also writes those turns, as the router folded them,
to the archive and trims their events (``XTRIM MINID``) — in the same script,
so Redis (and its AOF, which logs a script's writes as one transaction) never
holds a state where a committed turn is in neither place. A turn then reads
the meta hash, the newest ``window_turns`` archive entries and the short
events stream, in one MULTI; GetSession pages through the archive by turn
number. ``omitted`` is how many of the earliest turns the prompt leaves out
(``prompt.history_cut``): kept with the session so every router renders the
same, stable history prefix. Each append refreshes the TTL of all four keys.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis

from services.router.sessions.records import SCHEMA_VERSION, ToolRecord, TurnRecord, fold
from services.runtime.errors import InvalidArgument
from services.runtime.tenancy import check_tenant

__all__ = ["SCHEMA_VERSION", "Session", "SessionStore", "ToolRecord", "TurnRecord", "session_keys"]

# ARGV: turn id, ttl ms, created_at, system prompt, v, omitted, archived as read (-1: no compaction),
# MINID of the events to keep, event count n, n events, then (turn number, folded turn) pairs to archive.
APPEND_TURN = """
if redis.call('SISMEMBER', KEYS[3], ARGV[1]) == 1 then return 0 end
redis.call('HSETNX', KEYS[1], 'created_at', ARGV[3])
redis.call('HSETNX', KEYS[1], 'system_prompt', ARGV[4])
redis.call('HSETNX', KEYS[1], 'v', ARGV[5])
local n = tonumber(ARGV[9])
for i = 10, 9 + n do
  redis.call('XADD', KEYS[2], '*', 'v', ARGV[5], 'e', ARGV[i])
end
redis.call('SADD', KEYS[3], ARGV[1])
if tonumber(ARGV[6]) > tonumber(redis.call('HGET', KEYS[1], 'omitted') or '0') then
  redis.call('HSET', KEYS[1], 'omitted', ARGV[6])
end
if 10 + n < #ARGV and tonumber(ARGV[7]) == tonumber(redis.call('HGET', KEYS[1], 'archived') or '0') then
  for i = 10 + n, #ARGV, 2 do
    redis.call('XADD', KEYS[4], ARGV[i] .. '-0', 'v', ARGV[5], 't', ARGV[i + 1])
    redis.call('HSET', KEYS[1], 'archived', ARGV[i])
  end
  redis.call('XTRIM', KEYS[2], 'MINID', ARGV[8])
end
for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], ARGV[2]) end
return 1
"""

# Only a session that did not exist gets the TTL: an existing one keeps the expiry its last append set.
# ARGV: created_at, system prompt, v, ttl ms, the creating turn's id.
CREATE = """
if redis.call('HSETNX', KEYS[1], 'created_at', ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'system_prompt', ARGV[2], 'v', ARGV[3], 'created_by', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
"""


@dataclass
class Session:
    """A session as a turn sees it: the meta and its most recent turns (``turns``, numbered from ``first_turn``)."""

    tenant: str
    session_id: str
    system_prompt: str
    created_at: float
    turns: list[TurnRecord] = field(default_factory=list)
    #: Id of the turn that created the session ("" for sessions older than the field).
    created_by: str = ""
    ttl_s: float = 0.0
    #: Turns before ``turns[0]`` (archived beyond the window, or before a GetSession page).
    first_turn: int = 0
    #: Earliest turns the prompt leaves out; only ever grows.
    omitted: int = 0
    #: Turns in the archive, and how many of ``turns`` are still raw events (the newest ones).
    archived: int = 0
    tail: int = 0
    #: Id of the newest event read: compaction trims through it and no further.
    events_upto: str = ""
    #: The record of a retried turn id found outside the window.
    recorded: TurnRecord | None = None

    @property
    def turn_count(self) -> int:
        """Turns completed in the whole session."""
        return self.archived + self.tail

    def turn(self, turn_id: str) -> TurnRecord | None:
        found = next((t for t in self.turns if t.turn_id == turn_id), None)
        if found is None and self.recorded is not None and self.recorded.turn_id == turn_id:
            return self.recorded
        return found


def session_keys(prefix: str, tenant: str, session_id: str) -> tuple[str, str, str]:
    """The session's meta, events and turn-id keys; injective in (tenant, session_id).

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


def _after(stream_id: str) -> str:
    """The smallest stream id greater than ``stream_id``: XTRIM MINID keeps it and everything newer."""
    ms, seq = stream_id.split("-")
    return f"{ms}-{int(seq) + 1}"


def _number(entry_id: bytes) -> int:
    return int(entry_id.split(b"-")[0])


def _readable(fields: dict[bytes, bytes]) -> bool:
    """False for entries a newer router wrote in a schema this one cannot read."""
    return int(fields.get(b"v", b"1")) <= SCHEMA_VERSION


class SessionStore:
    """Creates, reads, pages and appends sessions (see module docstring)."""

    def __init__(
        self,
        redis: aioredis.Redis,
        ttl_s: float = 86_400.0,
        prefix: str = "agentmesh:session:",
        *,
        window_turns: int = 48,
        compact_after: int = 8,
    ) -> None:
        self._redis = redis
        self.ttl_s = ttl_s
        self._prefix = prefix
        self.window_turns = window_turns
        self.compact_after = compact_after
        self._append = redis.register_script(APPEND_TURN)
        self._create = redis.register_script(CREATE)

    def _keys(self, tenant: str, session_id: str) -> tuple[str, str, str, str]:
        meta, events, turns = session_keys(self._prefix, tenant, session_id)
        return meta, events, turns, events.removesuffix(":events") + ":archive"

    async def create(self, tenant: str, session_id: str, system_prompt: str, *, created_by: str = "") -> Session:
        """The session ``session_id``, created now by turn ``created_by`` unless it exists (then it is loaded
        as it is: its ``created_by`` says whether that turn created it)."""
        keys = self._keys(tenant, session_id)
        now = time.time()
        args: list[str | float] = [now, system_prompt, SCHEMA_VERSION, int(self.ttl_s * 1000), created_by]
        fresh = Session(tenant, session_id, system_prompt, now, ttl_s=self.ttl_s, created_by=created_by)
        if await self._create(keys=[keys[0]], args=args):
            return fresh
        existing = await self.load(tenant, session_id, created_by)
        return existing or fresh  # expired just now

    async def load(self, tenant: str, session_id: str, turn_id: str = "") -> Session | None:
        """The session with its newest turns (at most ``window_turns`` archived ones), or None.

        With ``turn_id``, a turn id the session recorded outside the window is looked up too (a late retry).
        """
        meta_key, events_key, turns_key, archive_key = self._keys(tenant, session_id)
        pipe = self._redis.pipeline(transaction=True)
        pipe.hgetall(meta_key)
        pipe.pttl(meta_key)
        pipe.xrevrange(archive_key, count=self.window_turns)
        pipe.xrange(events_key)
        pipe.sismember(turns_key, turn_id or "-")
        meta, ttl_ms, archived_entries, events, known = await pipe.execute()
        if not meta:
            return None
        session = self._session(tenant, session_id, meta, ttl_ms)
        session.archived = int(meta.get(b"archived", b"0"))
        session.omitted = int(meta.get(b"omitted", b"0"))
        window = [TurnRecord.from_json(f[b"t"]) for _, f in reversed(archived_entries) if _readable(f)]
        session.first_turn = _number(archived_entries[-1][0]) - 1 if archived_entries else session.archived
        tail = fold([json.loads(f[b"e"]) for _, f in events if _readable(f)])
        session.turns, session.tail = window + tail, len(tail)
        session.events_upto = events[-1][0].decode() if events else ""
        if turn_id and known and session.turn(turn_id) is None:
            session.recorded = await self._find(archive_key, turn_id)
        return session

    async def page(self, tenant: str, session_id: str, start: int, size: int) -> Session | None:
        """Up to ``size`` turns from turn number ``start`` (1 is the oldest), as ``turns`` of the session."""
        meta_key, events_key, _, archive_key = self._keys(tenant, session_id)
        pipe = self._redis.pipeline(transaction=True)
        pipe.hgetall(meta_key)
        pipe.pttl(meta_key)
        pipe.xrange(archive_key, min=f"{start}-0", count=size)
        pipe.xrange(events_key)
        meta, ttl_ms, archived_entries, events = await pipe.execute()
        if not meta:
            return None
        session = self._session(tenant, session_id, meta, ttl_ms)
        session.archived = int(meta.get(b"archived", b"0"))
        numbered = [(_number(i), TurnRecord.from_json(f[b"t"])) for i, f in archived_entries if _readable(f)]
        tail = fold([json.loads(f[b"e"]) for _, f in events if _readable(f)])
        numbered += [(session.archived + 1 + i, t) for i, t in enumerate(tail) if session.archived + 1 + i >= start]
        numbered = numbered[:size]
        session.turns = [t for _, t in numbered]
        session.first_turn = numbered[0][0] - 1 if numbered else session.archived + len(tail)
        session.tail = len(tail)
        return session

    def _session(self, tenant: str, session_id: str, meta: dict[bytes, bytes], ttl_ms: int | None) -> Session:
        return Session(
            tenant=tenant,
            session_id=session_id,
            system_prompt=meta.get(b"system_prompt", b"").decode(),
            created_at=float(meta.get(b"created_at", b"0")),
            ttl_s=ttl_ms / 1000 if ttl_ms and ttl_ms > 0 else 0.0,
            created_by=meta.get(b"created_by", b"").decode(),
        )

    async def _find(self, archive_key: str, turn_id: str) -> TurnRecord | None:
        """A turn's archived record, newest first: only a retry of a turn older than the window comes here."""
        upper = "+"
        while entries := await self._xrevrange(archive_key, upper):
            for _, fields in entries:
                record = TurnRecord.from_json(fields[b"t"]) if _readable(fields) else None
                if record is not None and record.turn_id == turn_id:
                    return record
            upper = "(" + entries[-1][0].decode()
        return None

    async def _xrevrange(self, key: str, upper: str) -> list[tuple[bytes, dict[bytes, bytes]]]:
        entries: Any = await self._redis.xrevrange(key, max=upper, count=100)  # redis-py types the reply loosely
        return list(entries)

    async def append_turn(self, session: Session, turn: TurnRecord) -> bool:
        """Append a completed turn (compacting the events read, when enough); False if its id was recorded."""
        keys = self._keys(session.tenant, session.session_id)
        payloads = [json.dumps(e, separators=(",", ":")) for e in turn.events()]
        compact = session.tail >= self.compact_after and bool(session.events_upto)
        args: list[Any] = [
            turn.turn_id,
            int(self.ttl_s * 1000),
            session.created_at or time.time(),
            session.system_prompt,
            SCHEMA_VERSION,
            session.omitted,
            session.archived if compact else -1,
            _after(session.events_upto) if compact else "0-1",
            len(payloads),
            *payloads,
        ]
        if compact:
            for i, record in enumerate(session.turns[len(session.turns) - session.tail :]):
                args += [session.archived + 1 + i, record.to_json()]
        return bool(await self._append(keys=list(keys), args=args))
