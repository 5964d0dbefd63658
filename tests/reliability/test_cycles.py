"""1000 StartTurn/CancelTurn cycles leave nothing behind; a slow reader does not grow the producers' memory."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from agentmesh.common.v1 import common_pb2
from tests.support import turns
from tests.support.process_mesh import AUTH, MeshShape, ProcessMesh
from tests.support.processes import ServiceProcess, eventually_async

SHAPE = MeshShape(replicas=2, routers=1)
STREAMS = 4
CYCLES = 1000
MIB = 1024 * 1024


async def cycle(stub: Any, stream: int, count: int) -> list[int]:
    """``count`` turns on one stream, each cancelled right after it is accepted; their finish reasons."""
    reasons: list[int] = []
    call = stub.Converse(metadata=AUTH, timeout=300)
    for i in range(count):
        turn_id = f"c{stream}-{i}"
        await call.write(turns.start("cancel me", turn_id=turn_id, max_tokens=300))
        first = await call.read()
        assert first.HasField("turn_accepted"), first
        await call.write(turns.cancel(turn_id))
        events = await turns.read_turn(call, within_s=30)
        done = turns.completed(events)
        assert done.turn_id == turn_id and not done.status, done
        reasons.append(done.finish_reason)
    await call.done_writing()
    assert await call.code() == grpc.StatusCode.OK
    return reasons


async def footprint(services: list[ServiceProcess]) -> dict[str, tuple[int, int, int]]:
    return {s.name: (s.rss_bytes(), s.open_fds(), s.threads()) for s in services}


async def idle(mesh: ProcessMesh) -> bool:
    in_flight = await mesh.gateway.metric("agentmesh_gateway_in_flight")
    streams = await mesh.routers[0].metric("agentmesh_rpc_server_in_flight", 0.0, grpc_method="Converse")
    return in_flight == 0 and streams == 0 and await mesh.unfinished() == 0


async def test_1000_start_cancel_cycles_return_everything_to_zero(mesh: ProcessMesh) -> None:
    watched = [mesh.gateway, *mesh.routers, *mesh.replicas]
    async with mesh.channel() as channel:
        stub = mesh.stub(channel)
        await asyncio.gather(*(cycle(stub, s, 25) for s in range(STREAMS)))  # warm-up: caches, pools, first-use
        await eventually_async(lambda: idle(mesh), within_s=20, what="mesh idle after warm-up")
        before = await footprint(watched)
        results = await asyncio.gather(*(cycle(stub, s, CYCLES // STREAMS) for s in range(STREAMS)))
    reasons = [r for stream in results for r in stream]
    assert len(reasons) == CYCLES
    assert set(reasons) <= {common_pb2.FINISH_REASON_ABORTED, common_pb2.FINISH_REASON_LENGTH}
    assert reasons.count(common_pb2.FINISH_REASON_ABORTED) > CYCLES // 2  # most were cut mid-answer
    await eventually_async(lambda: idle(mesh), within_s=20, what="gateway in-flight, streams and engines at 0")
    after = await footprint(watched)
    for name, (rss, fds, threads) in after.items():
        rss0, fds0, threads0 = before[name]
        assert rss - rss0 < max(8 * MIB, rss0 // 10), f"{name} grew {(rss - rss0) / MIB:.1f} MiB over {CYCLES} cycles"
        assert fds <= fds0 + 2, f"{name}: {fds0} → {fds} open files"
        assert threads <= threads0 + 2, f"{name}: {threads0} → {threads} threads"


async def test_a_slow_reader_does_not_grow_the_producers_memory(mesh: ProcessMesh) -> None:
    producers = [mesh.gateway, *mesh.routers]
    async with mesh.channel() as channel:
        stub = mesh.stub(channel)
        before = await footprint(producers)
        finished = await generations(mesh)
        calls: list[Any] = []
        for n in range(20):
            call = stub.Converse(metadata=AUTH, timeout=120)
            await call.write(turns.start(f"slow reader {n}", max_tokens=400))
            calls.append(call)
        # Nobody reads while the answers are produced (400 tokens at 10 ms a step: 4 s each).
        await eventually_async(lambda: produced(mesh, finished + 20), within_s=60, what="every answer produced")
        stalled = await footprint(producers)
        for call in calls:  # now read slowly: one event at a time, as the window opens
            events = await turns.read_turn(call, within_s=60)
            assert turns.completed(events).usage.completion_tokens == 400
            await call.done_writing()
    for name, (rss, _, _) in stalled.items():
        rss0 = before[name][0]
        assert rss - rss0 < 16 * MIB, f"{name} grew {(rss - rss0) / MIB:.1f} MiB holding a slow reader's answers"


async def generations(mesh: ProcessMesh) -> float:
    return sum([await r.metric("agentmesh_inference_requests_total", 0.0) for r in mesh.replicas])


async def produced(mesh: ProcessMesh, count: float) -> bool:
    return await generations(mesh) >= count
