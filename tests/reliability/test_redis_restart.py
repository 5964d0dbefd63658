"""Redis killed and restarted under a running mesh: nothing committed is lost, errors are clear, no restarts."""

from __future__ import annotations

import asyncio
import signal
import time
from typing import Any

import grpc
import grpc.aio
from google.rpc import status_pb2

from agentmesh.agent.v1 import agent_pb2
from services.runtime.status_decode import rich_error_of, rich_error_of_status
from tests.support import turns
from tests.support.process_mesh import AUTH, MeshShape, ProcessMesh

SHAPE = MeshShape(replicas=1, routers=1)


async def session_turns(stub: Any, session_id: str) -> list[str]:
    reply = await stub.GetSession(agent_pb2.GetSessionRequest(session_id=session_id), metadata=AUTH, timeout=10)
    return [t.turn_id for t in reply.session.turns]


async def test_redis_killed_and_restarted_keeps_committed_turns_and_the_mesh_recovers_alone(
    mesh: ProcessMesh,
) -> None:
    pids = [s.pid for s in mesh.services]
    async with mesh.channel() as channel:
        stub = mesh.stub(channel)
        first = await turns.one_turn(stub, turns.start("remember me", turn_id="r1", max_tokens=3), AUTH)
        session_id = first[0].turn_accepted.session_id
        for turn_id in ("r2", "r3"):
            await turns.one_turn(stub, turns.start("more", turn_id=turn_id, session_id=session_id, max_tokens=3), AUTH)
        assert await session_turns(stub, session_id) == ["r1", "r2", "r3"]

        await mesh.redis.stop(signal.SIGKILL)  # no shutdown save: only the AOF keeps what was acknowledged
        # While Redis is down: a clear status, quickly, for a turn and for a session read — no hang.
        began = time.monotonic()
        call = stub.Converse(metadata=AUTH, timeout=30)
        await call.write(turns.start("while down", turn_id="r4", session_id=session_id, max_tokens=3))
        events = await turns.read_turn(call, within_s=25)
        await call.done_writing()
        done = turns.completed(events)
        assert done.status, f"a turn without Redis must fail with a status: {events}"
        rich = rich_error_of_status(agent_status(done.status))
        assert rich.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED), rich
        assert rich.retry_after_s is not None, rich
        try:
            await session_turns(stub, session_id)
            raise AssertionError("GetSession answered without Redis")
        except grpc.aio.AioRpcError as exc:
            assert exc.code() == grpc.StatusCode.UNAVAILABLE, (exc.code(), exc.details())
            assert "internal error" not in (exc.details() or ""), exc.details()
            assert rich_error_of(exc).retry_after_s is not None
        assert time.monotonic() - began < 25

        await mesh.redis.start()
        # Recovery without restarting anything: a client that follows the retry hints gets through (bounded).
        events = await turn_with_retries(stub, session_id, "r5")
        assert not turns.completed(events).status, turns.completed(events)
        recorded = await session_turns(stub, session_id)
        assert recorded[:3] == ["r1", "r2", "r3"] and recorded[-1] == "r5"
        assert "r4" not in recorded
    assert [s.pid for s in mesh.services] == pids and all(s.running for s in mesh.services)


def agent_status(data: bytes) -> status_pb2.Status:
    return status_pb2.Status.FromString(data)


async def turn_with_retries(stub: Any, session_id: str, turn_id: str, attempts: int = 30) -> list[Any]:
    """One turn, retried (same turn id) as the status's retry hint says, as a well-behaved client does."""
    for _ in range(attempts):
        try:
            events = await turns.one_turn(
                stub, turns.start("after", turn_id=turn_id, session_id=session_id, max_tokens=3), AUTH
            )
        except grpc.aio.AioRpcError as exc:
            hint = rich_error_of(exc).retry_after_s
            assert exc.code() == grpc.StatusCode.UNAVAILABLE and hint is not None, (exc.code(), exc.details())
        else:
            done = turns.completed(events)
            if not done.status:
                return events
            hint = rich_error_of_status(agent_status(done.status)).retry_after_s
            assert hint is not None, done
        await asyncio.sleep(min(hint, 1.0))
    raise AssertionError(f"no turn got through in {attempts} attempts after Redis came back")
