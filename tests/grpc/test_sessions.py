"""Session event logs in real Redis: append once per turn id, rebuild, TTL, tenant scope."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from services.router.sessions import Session, SessionStore, ToolRecord, TurnRecord


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
