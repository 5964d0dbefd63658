"""The router on real grpc.aio servers with simulator replicas, a real tool executor and real Redis."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
import pytest
import redis.asyncio as aioredis
from google.rpc import status_pb2

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from meshkit.mesh import Mesh, start_mesh
from meshkit.turns import converse
from services.router.replicas.picker import RoundRobinPicker
from services.runtime.status_decode import rich_error_of, rich_error_of_status
from tests.support.turns import next_message
from tests.support.waiting import eventually

NONE = agent_pb2.ToolChoice(mode=agent_pb2.TOOL_CHOICE_MODE_NONE)
SYSTEM = " ".join(f"rule{i}" for i in range(300))  # 300 simulator tokens: many 16-token blocks


@pytest.fixture
async def mesh(redis_client: aioredis.Redis) -> AsyncIterator[Mesh]:
    m = await start_mesh(redis_client, replicas=4)
    yield m
    await m.close()


async def test_turn_streams_accepted_text_and_completed(mesh: Mesh) -> None:
    stub = await mesh.add_router()
    result = await converse(stub, agent_pb2.StartTurn(message="hello there", tool_choice=NONE))
    kinds = result.kinds()
    assert kinds[0] == "turn_accepted" and kinds[-1] == "turn_completed"
    assert set(kinds[1:-1]) == {"text_delta"}
    assert result.accepted.session_id and result.accepted.turn_id and len(result.accepted.trace_id) == 32
    done = result.completed
    assert done.usage.completion_tokens == 24 and done.finish_reason == common_pb2.FINISH_REASON_STOP
    assert done.timings.total.ToNanoseconds() > 0 and not done.cached
    assert sum(mesh.submitted()) == 1


async def test_sessions_continue_on_another_router_and_retries_are_not_duplicated(mesh: Mesh) -> None:
    router_a, router_b = await mesh.add_router(), await mesh.add_router()
    first = await converse(router_a, agent_pb2.StartTurn(message="my name is Ada", tool_choice=NONE, turn_id="t1"))
    sid = first.accepted.session_id
    second = await converse(
        router_b,
        agent_pb2.StartTurn(session_id=sid, message="what is my name?", tool_choice=NONE, turn_id="t2"),
    )
    # The second turn's prompt carries the first turn (history rebuilt from Redis by the other router).
    assert second.completed.usage.prompt_tokens > first.completed.usage.prompt_tokens + 20
    before = sum(mesh.submitted())
    retried = await converse(
        router_a,
        agent_pb2.StartTurn(session_id=sid, message="what is my name?", tool_choice=NONE, turn_id="t2"),
    )
    assert sum(mesh.submitted()) == before  # replayed, not run again
    assert retried.text == second.text and retried.completed.cached
    session = (await router_b.GetSession(agent_pb2.GetSessionRequest(session_id=sid))).session
    assert [t.turn_id for t in session.turns] == ["t1", "t2"]
    assert session.turns[0].user_message == "my name is Ada" and session.turns[1].answer == second.text


async def test_two_routers_place_a_session_on_the_same_replica(mesh: Mesh) -> None:
    router_a, router_b = await mesh.add_router(), await mesh.add_router()
    for s in range(6):
        before = mesh.submitted()
        first = await converse(
            router_a, agent_pb2.StartTurn(message=f"session {s} begins", system_prompt=SYSTEM, tool_choice=NONE)
        )
        after_a = mesh.submitted()
        await converse(
            router_b, agent_pb2.StartTurn(session_id=first.accepted.session_id, message="go on", tool_choice=NONE)
        )
        after_b = mesh.submitted()
        used_a = [i for i in range(4) if after_a[i] > before[i]]
        used_b = [i for i in range(4) if after_b[i] > after_a[i]]
        assert used_a == used_b and len(used_a) == 1


async def test_prefix_aware_placement_beats_round_robin_on_cache_hits(redis_client: aioredis.Redis) -> None:
    # A shared 100-token system prompt, then each session's own history: placement decides whether
    # the history is in the replica's cache.
    system = " ".join(f"rule{i}" for i in range(100))

    async def workload(mesh: Mesh, stub: Any) -> float:
        # 7 sessions over 4 replicas: round-robin cannot line up with sessions by accident.
        sessions: list[str] = [""] * 7
        for turn in range(6):
            for s in range(7):
                start = agent_pb2.StartTurn(
                    session_id=sessions[s],
                    message=f"session {s} turn {turn} question",
                    system_prompt=system,
                    tool_choice=NONE,
                )
                result = await converse(stub, start)
                sessions[s] = result.accepted.session_id
        return mesh.hit_rate()

    rates = {}
    for name, replicas, picker in (
        ("ours", 4, None),
        ("round-robin", 4, RoundRobinPicker()),
        ("ideal", 1, None),
    ):
        await redis_client.flushdb()
        mesh = await start_mesh(redis_client, replicas=replicas)
        try:
            stub = await mesh.add_router(picker=picker, response_cache_ttl_s=0)
            rates[name] = await workload(mesh, stub)
        finally:
            await mesh.close()
    assert rates["ours"] > rates["round-robin"] + 0.15, rates
    assert rates["ours"] > 0.9 * rates["ideal"], rates


async def test_replica_dying_mid_answer_fails_over_and_is_skipped(redis_client: aioredis.Redis) -> None:
    from dataclasses import replace

    from meshkit.mesh import FAST_SIM

    mesh = await start_mesh(redis_client, replicas=3, sim=replace(FAST_SIM, output_tokens=60, decode_base_s=0.01))
    try:
        stub = await mesh.add_router(response_cache_ttl_s=0)
        call = stub.Converse()
        await call.write(
            agent_pb2.ConverseRequest(start_turn=agent_pb2.StartTurn(message="tell me a long story", tool_choice=NONE))
        )
        events = [await next_message(call), await next_message(call), await next_message(call)]  # accepted + two deltas
        assert events[0].HasField("turn_accepted") and events[2].HasField("text_delta")
        victim = next(r for r in mesh.replicas if r.engine.unfinished_requests() == 1)
        await victim.server.drain(grace=0)  # the replica dies mid-answer
        while True:
            event = await asyncio.wait_for(next_message(call), 30)
            events.append(event)
            if event.HasField("turn_completed"):
                break
        await call.done_writing()
        assert await call.code() == grpc.StatusCode.OK
        text = "".join(e.text_delta.text for e in events if e.HasField("text_delta"))
        assert len(text.split()) >= 30  # the answer went on after the failure
        router = mesh.routers[0][0]
        assert router.metrics.failovers.labels("mid_answer")._value.get() == 1
        victim_count = victim.engine.submitted
        for i in range(4):
            await converse(stub, agent_pb2.StartTurn(message=f"another question {i}", tool_choice=NONE))
        assert victim.engine.submitted == victim_count  # the dead replica is skipped
    finally:
        await mesh.close()


async def test_flush_interval_sends_the_same_text_in_fewer_messages(mesh: Mesh) -> None:
    every_step = await mesh.add_router(response_cache_ttl_s=0, stream_flush_ms=0)
    merged = await mesh.add_router(response_cache_ttl_s=0, stream_flush_ms=60_000)
    request = agent_pb2.CompleteRequest(prompt="tell me a story", sampling=common_pb2.SamplingParams(temperature=0))
    runs = [[m async for m in stub.Complete(request)] for stub in (every_step, merged)]
    deltas = [[m.text_delta.text for m in run if m.HasField("text_delta")] for run in runs]
    assert "".join(deltas[0]) == "".join(deltas[1]) != ""
    assert len(deltas[0]) > 2 and len(deltas[1]) == 2  # the first text at once, the rest with the result
    assert deltas[1][0] == deltas[0][0]


async def test_response_cache_replays_without_touching_the_engine(mesh: Mesh) -> None:
    stub = await mesh.add_router()
    request = agent_pb2.CompleteRequest(prompt="say something", sampling=common_pb2.SamplingParams(temperature=0))
    first = [m async for m in stub.Complete(request)]
    submitted = sum(mesh.submitted())
    second = [m async for m in stub.Complete(request)]
    assert sum(mesh.submitted()) == submitted
    texts = ["".join(m.text_delta.text for m in run) for run in (first, second)]
    assert texts[0] == texts[1] != ""
    assert not first[-1].finished.cached and second[-1].finished.cached
    # Sampling at temperature > 0 is never cached.
    warm = agent_pb2.CompleteRequest(prompt="say something", sampling=common_pb2.SamplingParams(temperature=0.7))
    [m async for m in stub.Complete(warm)]
    [m async for m in stub.Complete(warm)]
    assert sum(mesh.submitted()) == submitted + 2


async def test_required_tool_runs_and_its_failure_is_shown_not_fatal(mesh: Mesh) -> None:
    stub = await mesh.add_router()
    choice = agent_pb2.ToolChoice(mode=agent_pb2.TOOL_CHOICE_MODE_NAMED, tool_name="clock")
    result = await converse(stub, agent_pb2.StartTurn(message="what time is it?", tool_choice=choice))
    kinds = result.kinds()
    assert kinds.index("tool_call_started") < kinds.index("tool_call_finished") < kinds.index("text_delta")
    finished = next(e.tool_call_finished for e in result.events if e.HasField("tool_call_finished"))
    # The simulator plans {"timezone": "x"}: the clock tool fails, and the turn still completes.
    assert finished.tool_name == "clock" and finished.status == common_pb2.TOOL_CALL_STATUS_FAILED
    assert "unknown time zone" in finished.error_message
    assert result.completed.tool_rounds == 1 and result.text


async def test_cancel_turn_stops_the_generation(redis_client: aioredis.Redis) -> None:
    from dataclasses import replace

    from meshkit.mesh import FAST_SIM

    mesh = await start_mesh(redis_client, replicas=2, sim=replace(FAST_SIM, output_tokens=500, decode_base_s=0.01))
    try:
        stub = await mesh.add_router()
        call = stub.Converse()
        start = agent_pb2.StartTurn(
            message="long", tool_choice=NONE, turn_id="c1", sampling=common_pb2.SamplingParams(max_tokens=500)
        )
        await call.write(agent_pb2.ConverseRequest(start_turn=start))
        assert (await next_message(call)).HasField("turn_accepted")
        assert (await next_message(call)).HasField("text_delta")
        await call.write(agent_pb2.ConverseRequest(cancel_turn=agent_pb2.CancelTurn(turn_id="c1")))
        await eventually(lambda: mesh.unfinished() == 0, 5, "engines idle")
        # The stream stays usable for the next turn.
        await call.write(
            agent_pb2.ConverseRequest(
                start_turn=agent_pb2.StartTurn(
                    message="short", tool_choice=NONE, sampling=common_pb2.SamplingParams(max_tokens=3)
                )
            )
        )
        events: list[Any] = []
        while not events or not events[-1].HasField("turn_completed"):
            events.append(await asyncio.wait_for(call.read(), 10))
        await call.done_writing()
        # A dropped stream cancels too.
        call2 = stub.Converse()
        await call2.write(agent_pb2.ConverseRequest(start_turn=start))
        await call2.read()
        await call2.read()
        call2.cancel()
        await eventually(lambda: mesh.unfinished() == 0, 5, "engines idle after disconnect")
    finally:
        await mesh.close()


async def test_bad_requests_get_clear_errors(mesh: Mesh) -> None:
    stub = await mesh.add_router()
    # A rejected turn ends with its TurnCompleted, carrying the status and field violations (the stream goes on).
    call = stub.Converse()
    await call.write(agent_pb2.ConverseRequest(start_turn=agent_pb2.StartTurn(message="  ")))
    done = (await next_message(call)).turn_completed
    rich = rich_error_of_status(status_pb2.Status.FromString(done.status))
    assert done.finish_reason == common_pb2.FINISH_REASON_ERROR and rich.message.startswith("start_turn.message")
    assert [v.field for v in rich.field_violations] == ["start_turn.message"]

    bad_tool = agent_pb2.StartTurn(
        message="x", tool_choice=agent_pb2.ToolChoice(mode=agent_pb2.TOOL_CHOICE_MODE_NAMED, tool_name="nope")
    )
    await call.write(agent_pb2.ConverseRequest(start_turn=bad_tool))
    done = (await next_message(call)).turn_completed
    rich = rich_error_of_status(status_pb2.Status.FromString(done.status))
    assert [v.field for v in rich.field_violations] == ["start_turn.tool_choice.tool_name"]
    await call.done_writing()
    assert await call.code() == grpc.StatusCode.OK

    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.GetSession(agent_pb2.GetSessionRequest(session_id="missing"))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND

    mine = await converse(
        stub, agent_pb2.StartTurn(message="secret", tool_choice=NONE), metadata=[("x-agentmesh-tenant", "acme")]
    )
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.GetSession(
            agent_pb2.GetSessionRequest(session_id=mine.accepted.session_id),
            metadata=(("x-agentmesh-tenant", "other"),),
        )
    assert err.value.code() == grpc.StatusCode.NOT_FOUND

    with pytest.raises(grpc.aio.AioRpcError) as err:
        [
            m
            async for m in stub.Complete(
                agent_pb2.CompleteRequest(prompt="x", sampling=common_pb2.SamplingParams(max_tokens=100_000))
            )
        ]
    assert [v.field for v in rich_error_of(err.value).field_violations] == ["sampling.max_tokens"]
    tools = (await stub.ListTools(agent_pb2.ListToolsRequest())).tools
    assert {"calculator", "clock"} <= {t.name for t in tools}
