"""kill -9 mid-work: an inference replica mid-answer, the tool executor mid-call, a router mid-turn."""

from __future__ import annotations

import signal
from typing import Any

import grpc
import grpc.aio
import pytest

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from services.runtime.status_decode import rich_error_of
from tests.support import turns
from tests.support.process_mesh import AUTH, MeshShape, ProcessMesh
from tests.support.processes import ServiceProcess, busy_one, eventually_async

SHAPE = MeshShape(replicas=2, routers=2)
CONVERSE = {"grpc_method": "Converse"}


async def victim_streams(replica: ServiceProcess, routers: int) -> bool:
    return await replica.metric("agentmesh_rpc_server_in_flight", 0.0, grpc_method="Generate") >= routers


async def generations(mesh: ProcessMesh) -> float:
    return sum([await r.metric("agentmesh_inference_requests_total", 0.0) for r in mesh.replicas if r.running])


async def test_kill_9_a_replica_mid_answer_fails_over_and_it_rejoins_after_restart(mesh: ProcessMesh) -> None:
    async with mesh.channel() as channel:
        call: Any = mesh.stub(channel).Converse(metadata=AUTH, timeout=60)
        await call.write(turns.start("a long story about failover", turn_id="kill-replica", max_tokens=300))
        before = [await call.read() for _ in range(4)]  # accepted + three deltas: the answer is under way
        assert before[0].HasField("turn_accepted") and all(e.HasField("text_delta") for e in before[1:])
        victim = await busy_one(mesh.replicas, "agentmesh_inference_running_requests")
        victim.kill()
        rest = await turns.read_turn(call, within_s=30)
        await call.done_writing()
        assert await call.code() == grpc.StatusCode.OK
    done = turns.completed(rest)
    assert done.finish_reason == common_pb2.FINISH_REASON_LENGTH and not done.status
    assert done.usage.completion_tokens == 300  # continued on the other replica to the full length
    assert len(turns.text(before + rest).split()) >= 250
    assert await victim.wait_exit() == -signal.SIGKILL
    await victim.start()
    # It rejoins: every router opens its Generate stream to it again, and new sessions land on it
    # (placement follows the prompt's prefix, so each probe has its own system prompt; bounded attempts).
    await eventually_async(
        lambda: victim_streams(victim, len(mesh.routers)), within_s=20, what="every router reconnected"
    )
    async with mesh.channel() as channel:
        stub = mesh.stub(channel)
        for i in range(40):
            probe = turns.start("rejoin probe", max_tokens=2, system_prompt=f"You are probe {i}.")
            await turns.one_turn(stub, probe, AUTH)
            if await victim.metric("agentmesh_inference_requests_total", 0.0) > 0:
                break
        else:
            pytest.fail(f"{victim.name} served none of 40 turns after its restart")


async def test_kill_9_the_tool_executor_mid_call_fails_the_call_not_the_turn(mesh: ProcessMesh) -> None:
    tools = mesh.tools
    tools.signal(signal.SIGSTOP)  # the call is sent and then sits in flight until the kill
    try:
        async with mesh.channel() as channel:
            call: Any = mesh.stub(channel).Converse(metadata=AUTH, timeout=60)
            await call.write(
                turns.start("5 kg to lb", turn_id="kill-tools", tool_choice=turns.named_tool("unit_convert"))
            )
            events = [await call.read(), await call.read()]
            assert events[1].HasField("tool_call_started"), events
            tools.kill()
            events += await turns.read_turn(call, within_s=30)
            await call.done_writing()
            session_id = events[0].turn_accepted.session_id
            finished = next(e.tool_call_finished for e in events if e.HasField("tool_call_finished"))
            assert finished.status != common_pb2.TOOL_CALL_STATUS_OK and finished.error_message
            done = turns.completed(events)
            assert done.finish_reason in (common_pb2.FINISH_REASON_STOP, common_pb2.FINISH_REASON_LENGTH)
            assert not done.status and turns.text(events)  # the turn answered, with the failure in its prompt
            # The failure is what the session (and so the model's next prompt) records for the call.
            session = await mesh.stub(channel).GetSession(
                agent_pb2.GetSessionRequest(session_id=session_id), metadata=AUTH, timeout=10
            )
            recorded = session.session.turns[-1].tool_calls[0]
            assert recorded.status == finished.status and recorded.error_message == finished.error_message
    finally:
        tools.signal(signal.SIGCONT)
    assert await tools.wait_exit() == -signal.SIGKILL
    await tools.start()
    async with mesh.channel() as channel:
        stub = mesh.stub(channel)
        # The router's tool stream reconnects on its own (bounded: a few turns).
        for _ in range(20):
            events = await turns.one_turn(
                stub, turns.start("5 kg to lb", tool_choice=turns.named_tool("unit_convert")), AUTH
            )
            finished = next(e.tool_call_finished for e in events if e.HasField("tool_call_finished"))
            if finished.status == common_pb2.TOOL_CALL_STATUS_OK:
                break
        assert finished.status == common_pb2.TOOL_CALL_STATUS_OK, finished.error_message


async def test_kill_9_a_router_mid_turn_is_unavailable_with_retry_info_and_a_retry_runs_once(
    mesh: ProcessMesh,
) -> None:
    async with mesh.channel() as channel:
        stub = mesh.stub(channel)
        first = await turns.one_turn(stub, turns.start("open a session", max_tokens=2), AUTH)
        session_id = first[0].turn_accepted.session_id
        call = stub.Converse(metadata=AUTH, timeout=60)
        await call.write(turns.start("a long answer", turn_id="kill-router", session_id=session_id, max_tokens=300))
        assert (await turns.next_message(call)).HasField("turn_accepted")
        assert (await turns.next_message(call)).HasField("text_delta")
        victim = await busy_one(mesh.routers, "agentmesh_rpc_server_in_flight", **CONVERSE)
        victim.kill()
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await turns.read_turn(call, within_s=30)
        assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
        rich = rich_error_of(failed.value)
        assert rich.retry_after_s is not None and rich.retry_after_s > 0, rich
        # The retry (same session, same turn id) runs on the surviving router, once.
        retried = await turns.one_turn(
            stub, turns.start("a long answer", turn_id="kill-router", session_id=session_id, max_tokens=300), AUTH
        )
        assert turns.completed(retried).finish_reason == common_pb2.FINISH_REASON_LENGTH
        assert not turns.completed(retried).cached
        ran = await generations(mesh)
        again = await turns.one_turn(
            stub, turns.start("a long answer", turn_id="kill-router", session_id=session_id, max_tokens=300), AUTH
        )
        assert turns.completed(again).cached  # replayed from the session, not run
        assert turns.text(again) == turns.text(retried)
        assert await generations(mesh) == ran
        session = await stub.GetSession(agent_pb2.GetSessionRequest(session_id=session_id), metadata=AUTH, timeout=10)
        assert [t.turn_id for t in session.session.turns].count("kill-router") == 1
