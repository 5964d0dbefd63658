"""The session API on a real router: NOT_FOUND for unknown ids unless created, sessions stored when accepted,
GetSession pages, and a long session's history prefix staying in the replica's prefix cache."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import grpc
import grpc.aio
import pytest
import redis.asyncio as aioredis
from google.rpc import status_pb2

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from loadtest.session_prefix import run_session
from meshkit.mesh import FAST_SIM, Mesh, start_mesh
from meshkit.turns import TurnResult, converse
from services.runtime.status_decode import rich_error_of
from tests.support.turns import next_message
from tests.support.waiting import eventually

NONE = agent_pb2.ToolChoice(mode=agent_pb2.TOOL_CHOICE_MODE_NONE)


@pytest.fixture
async def mesh(redis_client: aioredis.Redis) -> AsyncIterator[Mesh]:
    m = await start_mesh(redis_client, replicas=1)
    yield m
    await m.close()


async def test_an_unknown_session_is_not_found_unless_the_client_creates_it(mesh: Mesh) -> None:
    stub = await mesh.add_router()
    missing = await converse(stub, agent_pb2.StartTurn(session_id="never-seen", message="hi", tool_choice=NONE))
    # Before: a new session silently started under that id.
    assert missing.kinds() == ["turn_completed"]
    assert missing.completed.finish_reason == common_pb2.FINISH_REASON_ERROR
    assert status_pb2.Status.FromString(missing.completed.status).code == grpc.StatusCode.NOT_FOUND.value[0]
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.GetSession(agent_pb2.GetSessionRequest(session_id="never-seen"))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND  # the refused turn created nothing
    start = agent_pb2.StartTurn(session_id="mine", create_session=True, message="my name is Ada", tool_choice=NONE)
    created = await converse(stub, start)
    assert created.accepted.session_id == "mine"
    go_on = await converse(stub, agent_pb2.StartTurn(session_id="mine", message="and mine?", tool_choice=NONE))
    assert go_on.completed.finish_reason == common_pb2.FINISH_REASON_STOP
    session = (await stub.GetSession(agent_pb2.GetSessionRequest(session_id="mine"))).session
    assert [t.user_message for t in session.turns] == ["my name is Ada", "and mine?"] and session.turn_count == 2


def _code(result: TurnResult) -> grpc.StatusCode:
    status = status_pb2.Status.FromString(result.completed.status) if result.completed.status else None
    return next(c for c in grpc.StatusCode if status is not None and c.value[0] == status.code)


async def test_a_chosen_id_is_created_once_per_tenant_and_a_retried_creating_turn_continues(mesh: Mesh) -> None:
    stub = await mesh.add_router()
    other = (("x-agentmesh-tenant", "other"),)

    def create(message: str, turn_id: str = "", sid: str = "team-chat.1") -> agent_pb2.StartTurn:
        return agent_pb2.StartTurn(
            session_id=sid, create_session=True, turn_id=turn_id, message=message, tool_choice=NONE
        )

    first = await converse(stub, create("hello", turn_id="t-1"))
    assert first.accepted.session_id == "team-chat.1" and first.completed.finish_reason == common_pb2.FINISH_REASON_STOP
    # The same turn id again (a client retrying after a lost reply): the turn it created, replayed, not refused.
    retried = await converse(stub, create("hello", turn_id="t-1"))
    assert retried.accepted.session_id == "team-chat.1" and retried.text == first.text
    # Any other turn asking to create it: ALREADY_EXISTS, and nothing appended.
    taken = await converse(stub, create("hello again", turn_id="t-2"))
    assert taken.kinds() == ["turn_completed"] and _code(taken) == grpc.StatusCode.ALREADY_EXISTS
    # The id is the tenant's own: another tenant creates its own session of that name, and sees only it.
    theirs = await converse(stub, create("bonjour"), metadata=other)
    assert theirs.accepted.session_id == "team-chat.1"
    mine = (await stub.GetSession(agent_pb2.GetSessionRequest(session_id="team-chat.1"))).session
    seen = (await stub.GetSession(agent_pb2.GetSessionRequest(session_id="team-chat.1"), metadata=other)).session
    assert [t.user_message for t in mine.turns] == ["hello"] and [t.user_message for t in seen.turns] == ["bonjour"]
    for bad in ("has space", "slash/ed", "x" * 129, "ünï"):
        refused = await converse(stub, create("hi", sid=bad))
        assert _code(refused) == grpc.StatusCode.INVALID_ARGUMENT, bad
        assert b"start_turn.session_id" in refused.completed.status
    assert (await converse(stub, create("hi", sid="x" * 128))).accepted.session_id == "x" * 128


async def test_a_new_session_is_stored_once_accepted(redis_client: aioredis.Redis) -> None:
    """So a client that retries after its router died mid-turn finds the session the server chose."""
    slow = await start_mesh(redis_client, replicas=1, sim=replace(FAST_SIM, output_tokens=400, decode_base_s=0.02))
    try:
        stub = await slow.add_router()
        call = stub.Converse()
        start = agent_pb2.StartTurn(message="a long story", tool_choice=NONE)
        await call.write(agent_pb2.ConverseRequest(start_turn=start))
        accepted = (await next_message(call)).turn_accepted
        # acceptance is sent before the turn's generation reaches the replica: wait for it to be there
        await eventually(lambda: slow.unfinished() == 1, what="the turn reaching the replica")
        session = (await stub.GetSession(agent_pb2.GetSessionRequest(session_id=accepted.session_id))).session
        assert slow.unfinished() == 1  # the turn is still answering (8 s of simulated decode)
        assert session.turn_count == 0 and not session.turns  # before: NOT_FOUND until the first turn completed
        call.cancel()
    finally:
        await slow.close()


async def test_get_session_pages_oldest_first(mesh: Mesh) -> None:
    stub = await mesh.add_router()
    sid = ""
    for i in range(5):
        turn = await converse(stub, agent_pb2.StartTurn(session_id=sid, message=f"turn {i}", tool_choice=NONE))
        sid = turn.accepted.session_id
    pages, token = [], ""
    while True:
        reply = await stub.GetSession(agent_pb2.GetSessionRequest(session_id=sid, page_size=2, page_token=token))
        pages.append([t.user_message for t in reply.session.turns])
        assert reply.session.turn_count == 5
        token = reply.next_page_token
        if not token:
            break
    assert pages == [["turn 0", "turn 1"], ["turn 2", "turn 3"], ["turn 4"]]
    bad_pages = [
        agent_pb2.GetSessionRequest(session_id=sid, page_token="abc"),
        agent_pb2.GetSessionRequest(session_id=sid, page_size=201),
    ]
    for bad in bad_pages:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.GetSession(bad)
        assert rich_error_of(err.value).code == grpc.StatusCode.INVALID_ARGUMENT
        assert rich_error_of(err.value).field_violations


async def test_a_long_session_keeps_its_history_in_the_prefix_cache(redis_client: aioredis.Redis) -> None:
    # The simulator's cache is deterministic: these are counts, not timings.
    per_turn = await run_session(redis_client, turns=20, budget=300, keep=1.0)
    chunked = await run_session(redis_client, turns=20, budget=300, keep=0.5)
    first = per_turn.over_budget_from()
    assert first < 10
    system_tokens = 100
    assert per_turn.beyond_system(system_tokens, first) <= 2  # the omitted-turns line changed every turn
    assert chunked.beyond_system(system_tokens, first) >= (20 - first) * 2 // 3
    assert chunked.hit_rate(first) > per_turn.hit_rate(first) + 0.2
