"""Sessions in real Redis: append once per turn id, rebuild, TTL, tenant scope, compaction, pages, creation."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from services.router.sessions.store import Session, SessionStore, ToolRecord, TurnRecord


def turn(turn_id: str, text: str) -> TurnRecord:
    return TurnRecord(
        turn_id=turn_id,
        user_message=f"q {text}",
        answer=f"a {text}",
        tool_calls=[ToolRecord("c1", "calculator", '{"expression":"1+1"}', 1, '{"result":2}', "", 0.01, False)],
        usage={"prompt_tokens": 10, "completion_tokens": 5, "cached_prompt_tokens": 0},
        finish_reason=1,
        completed_at=1.0,
    )


async def test_append_is_idempotent_and_rebuilds(redis_client: aioredis.Redis) -> None:
    store = SessionStore(redis_client, ttl_s=60)
    session = Session("acme", "s1", "be nice", created_at=100.0)
    assert await store.append_turn(session, turn("t1", "one"))
    assert not await store.append_turn(session, turn("t1", "one again"))
    assert await store.append_turn(session, turn("t2", "two"))
    loaded = await store.load("acme", "s1")
    assert loaded is not None and loaded.system_prompt == "be nice" and loaded.created_at == 100.0
    assert [(t.turn_id, t.answer) for t in loaded.turns] == [("t1", "a one"), ("t2", "a two")]
    assert loaded.turns[0].tool_calls[0].output_json == '{"result":2}'
    assert 0 < loaded.ttl_s <= 60
    events: Any = await redis_client.xrange("agentmesh:session:{acme:s1}:events")
    assert {fields[b"v"] for _, fields in events} == {b"1"}
    assert len(events) == 2 * 7  # user, plan, call, result, answer, usage, completed per turn


async def test_sessions_are_scoped_by_tenant_and_expire(redis_client: aioredis.Redis) -> None:
    store = SessionStore(redis_client, ttl_s=0.2)
    await store.append_turn(Session("acme", "s1", "", created_at=1.0), turn("t1", "x"))
    assert await store.load("other", "s1") is None
    ttl = await redis_client.pttl("agentmesh:session:{acme:s1}:meta")
    assert 0 < ttl <= 200
    for key in ("meta", "events", "turns"):
        assert 0 < await redis_client.pttl(f"agentmesh:session:{{acme:s1}}:{key}") <= 200


async def run_turns(store: SessionStore, sid: str, ids: range) -> None:
    """Turns as the agent loop records them: load the session (create it the first time), then append."""
    for i in ids:
        session = await store.load("acme", sid) or await store.create("acme", sid, "be nice")
        assert await store.append_turn(session, turn(f"t{i}", str(i)))


async def all_pages(store: SessionStore, sid: str, size: int) -> list[TurnRecord]:
    out: list[TurnRecord] = []
    start = 1
    while True:
        page = await store.page("acme", sid, start, size)
        assert page is not None and len(page.turns) <= size and page.first_turn == start - 1
        out += page.turns
        start += len(page.turns)
        if not page.turns or start > page.turn_count:
            return out


async def test_a_turn_reads_recent_events_only_and_no_turn_is_lost(redis_client: aioredis.Redis) -> None:
    store = SessionStore(redis_client, ttl_s=60, window_turns=10, compact_after=8)
    await run_turns(store, "long", range(1, 31))
    events: Any = await redis_client.xlen("agentmesh:session:{acme:long}:events")
    archived: Any = await redis_client.xlen("agentmesh:session:{acme:long}:archive")
    assert events <= 8 * 7 and archived >= 30 - 8  # before: all 30 × 7 events in the stream, read every turn
    assert 0 < await redis_client.pttl("agentmesh:session:{acme:long}:archive") <= 60_000
    loaded = await store.load("acme", "long")
    assert loaded is not None and loaded.turn_count == 30 and len(loaded.turns) <= 10 + 8
    assert [t.turn_id for t in loaded.turns] == [f"t{i}" for i in range(loaded.first_turn + 1, 31)]
    # Compaction moved every turn, none lost or doubled, with all it recorded.
    every = await all_pages(store, "long", 7)
    assert every == [turn(f"t{i}", str(i)) for i in range(1, 31)]


async def test_compaction_from_a_stale_read_is_skipped_not_doubled(redis_client: aioredis.Redis) -> None:
    store = SessionStore(redis_client, ttl_s=60, compact_after=3)
    await run_turns(store, "race", range(1, 4))
    first, second = await store.load("acme", "race"), await store.load("acme", "race")
    assert first is not None and second is not None and first.tail == second.tail == 3
    assert await store.append_turn(first, turn("a", "a"))  # compacts turns 1-3
    assert await store.append_turn(second, turn("b", "b"))  # read before that compaction: appends only
    assert [t.turn_id for t in await all_pages(store, "race", 2)] == ["t1", "t2", "t3", "a", "b"]


async def test_a_late_retry_of_a_turn_outside_the_window_is_found(redis_client: aioredis.Redis) -> None:
    store = SessionStore(redis_client, ttl_s=60, window_turns=3, compact_after=2)
    await run_turns(store, "retry", range(1, 13))
    session = await store.load("acme", "retry", "t1")
    assert session is not None and all(t.turn_id != "t1" for t in session.turns)
    recorded = session.turn("t1")
    assert recorded is not None and recorded.answer == "a 1"  # replayed, not run again
    assert not await store.append_turn(session, turn("t1", "again"))


async def test_a_created_session_exists_before_its_first_turn(redis_client: aioredis.Redis) -> None:
    store = SessionStore(redis_client, ttl_s=60)
    created = await store.create("acme", "fresh", "be brief")
    loaded = await store.load("acme", "fresh")
    assert loaded is not None and loaded.turns == [] and loaded.system_prompt == "be brief"
    assert loaded.created_at == created.created_at and 0 < loaded.ttl_s <= 60
    again = await store.create("acme", "fresh", "another prompt")  # creating twice continues the first
    assert again.system_prompt == "be brief"
