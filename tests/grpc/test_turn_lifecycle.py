"""Every StartTurn ends with exactly one TurnCompleted: cancelled, timed out, rejected or failed (real mesh)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import grpc
import grpc.aio
import pytest
import redis.asyncio as aioredis
from google.protobuf.duration_pb2 import Duration
from google.rpc import error_details_pb2, status_pb2

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from meshkit.mesh import FAST_SIM, Mesh, start_mesh
from tests.support.turns import next_message
from tests.support.waiting import eventually

NONE = agent_pb2.ToolChoice(mode=agent_pb2.TOOL_CHOICE_MODE_NONE)
ACME = (("authorization", "Bearer acme-secret-key"),)
LONG = common_pb2.SamplingParams(max_tokens=500)


@pytest.fixture
async def mesh(redis_client: aioredis.Redis) -> AsyncIterator[Mesh]:
    m = await start_mesh(redis_client, replicas=2, sim=replace(FAST_SIM, output_tokens=500, decode_base_s=0.01))
    yield m
    await m.close()


def start(message: str, turn_id: str = "", **kwargs: Any) -> agent_pb2.ConverseRequest:
    return agent_pb2.ConverseRequest(
        start_turn=agent_pb2.StartTurn(message=message, tool_choice=NONE, turn_id=turn_id, **kwargs)
    )


def cancel(turn_id: str) -> agent_pb2.ConverseRequest:
    return agent_pb2.ConverseRequest(cancel_turn=agent_pb2.CancelTurn(turn_id=turn_id))


async def until_completed(call: Any) -> list[agent_pb2.ConverseResponse]:
    events: list[agent_pb2.ConverseResponse] = []
    while not events or not events[-1].HasField("turn_completed"):
        event = await asyncio.wait_for(call.read(), 15)
        assert event is not grpc.aio.EOF, f"stream ended before TurnCompleted: {events}"
        events.append(event)
    return events


def status_of(done: agent_pb2.TurnCompleted) -> status_pb2.Status:
    assert done.status, "a failed turn carries its google.rpc.Status"
    return status_pb2.Status.FromString(done.status)


async def test_cancel_ends_the_turn_with_aborted_usage_so_far_and_the_stream_goes_on(mesh: Mesh) -> None:
    stub = await mesh.add_router(response_cache_ttl_s=0)
    call = stub.Converse()
    await call.write(start("tell me a long story", "c1", sampling=LONG))
    events = [await next_message(call) for _ in range(4)]  # accepted + three deltas
    assert events[0].HasField("turn_accepted")
    assert [e.text_delta.turn_id for e in events[1:]] == ["c1"] * 3  # deltas carry their turn id
    await call.write(cancel("c1"))
    rest = await until_completed(call)
    done = rest[-1].turn_completed
    assert done.turn_id == "c1" and done.finish_reason == common_pb2.FINISH_REASON_ABORTED
    assert done.usage.completion_tokens > 0 and done.usage.prompt_tokens > 0  # what it cost so far
    assert not done.status
    assert all(e.text_delta.turn_id == "c1" for e in rest if e.HasField("text_delta"))
    await eventually(lambda: mesh.unfinished() == 0, 5, "engines idle")
    # The stream stays usable, and the next turn completes normally.
    await call.write(start("short", "c2", sampling=common_pb2.SamplingParams(max_tokens=3)))
    after = await until_completed(call)
    assert after[0].turn_accepted.turn_id == "c2"
    assert after[-1].turn_completed.finish_reason == common_pb2.FINISH_REASON_LENGTH
    await call.done_writing()
    assert await call.code() == grpc.StatusCode.OK


async def test_turn_timeout_aborts_with_deadline_exceeded_and_the_stream_goes_on(mesh: Mesh) -> None:
    stub = await mesh.add_router(response_cache_ttl_s=0)
    call = stub.Converse()
    await call.write(start("tell me a long story", "t1", sampling=LONG, timeout=Duration(nanos=300_000_000)))
    done = (await until_completed(call))[-1].turn_completed
    assert done.finish_reason == common_pb2.FINISH_REASON_ABORTED and done.usage.completion_tokens > 0
    assert status_of(done).code == grpc.StatusCode.DEADLINE_EXCEEDED.value[0]
    await eventually(lambda: mesh.unfinished() == 0, 5, "engines idle")
    await call.write(start("short", "t2", sampling=common_pb2.SamplingParams(max_tokens=3)))
    assert not (await until_completed(call))[-1].turn_completed.status
    await call.done_writing()


async def test_rejected_and_failed_turns_end_with_their_status_and_the_stream_goes_on(mesh: Mesh) -> None:
    stub = await mesh.add_router(response_cache_ttl_s=0)
    call = stub.Converse()
    await call.write(start("hello", "bad", max_tool_rounds=9))
    events = await until_completed(call)
    assert len(events) == 1  # rejected: no TurnAccepted, only the TurnCompleted
    done = events[0].turn_completed
    assert done.turn_id == "bad" and done.finish_reason == common_pb2.FINISH_REASON_ERROR
    status = status_of(done)
    assert status.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    bad = error_details_pb2.BadRequest()
    assert any(d.Unpack(bad) for d in status.details if d.Is(bad.DESCRIPTOR))
    assert [v.field for v in bad.field_violations] == ["start_turn.max_tool_rounds"]
    # Every replica goes away: the turn fails (UNAVAILABLE), the stream does not.
    for replica in mesh.replicas:
        await replica.server.drain(grace=0)
    router = mesh.routers[0][0]
    await eventually(lambda: not any(link.available for link in router.replicas.replicas), 5, "replicas down")
    await call.write(start("anyone there?", "down"))
    done = (await until_completed(call))[-1].turn_completed
    assert done.turn_id == "down" and done.finish_reason == common_pb2.FINISH_REASON_ERROR
    assert status_of(done).code == grpc.StatusCode.UNAVAILABLE.value[0]
    await call.done_writing()
    assert await call.code() == grpc.StatusCode.OK


async def test_gateway_tickets_are_keyed_by_turn_and_cancelled_turns_are_charged(mesh: Mesh) -> None:
    await mesh.add_router(response_cache_ttl_s=0)
    stub, gateway, _ = await mesh.add_gateway(
        concurrency_initial=2.0, concurrency_min=2.0, concurrency_max=2.0, slo_p1_s=0.2, rate_burst=100.0
    )
    charged: list[int] = []
    limiter = gateway.servicer._limiter
    real_charge = limiter.charge

    async def charge(tenant: str, tokens: int) -> None:
        charged.append(tokens)
        await real_charge(tenant, tokens)

    limiter.charge = charge  # type: ignore[method-assign]
    admission = gateway.admission
    call = stub.Converse(metadata=ACME)
    # One tenant cycling StartTurn/CancelTurn never holds more than the turn it runs: with a limit of 2 and
    # a 0.2 s queue SLO, a slot leaked per cancelled turn would shed the third StartTurn.
    for i in range(6):
        await call.write(start("tell me a long story", f"cycle{i}", sampling=LONG))
        first = await next_message(call)
        assert first.HasField("turn_accepted"), first
        assert (await next_message(call)).HasField("text_delta")
        assert admission.in_flight == 1
        await call.write(cancel(f"cycle{i}"))
        done = (await until_completed(call))[-1].turn_completed
        assert done.turn_id == f"cycle{i}" and done.finish_reason == common_pb2.FINISH_REASON_ABORTED
        await eventually(lambda: admission.in_flight == 0, 5, "slot given back")
    assert len(charged) == 6 and all(tokens > 0 for tokens in charged)  # partial usage charged
    # A turn without an id gets one from the gateway, so its ticket still has a key.
    await call.write(start("short", sampling=common_pb2.SamplingParams(max_tokens=3)))
    events = await until_completed(call)
    assert events[0].turn_accepted.turn_id and events[-1].turn_completed.turn_id == events[0].turn_accepted.turn_id
    assert admission.in_flight == 0
    # The client leaves mid-turn: the gateway cancels it on the router, charges it and frees its slot.
    await call.write(start("tell me a long story", "left", sampling=LONG))
    await call.read()
    await call.read()
    call.cancel()
    await eventually(lambda: admission.in_flight == 0 and len(charged) == 8, 10, "the abandoned turn ended")
    await eventually(lambda: mesh.unfinished() == 0, 5, "engines idle")
