"""SIGTERM each service under load: in-flight streams finish, new work goes elsewhere, the process exits 0."""

from __future__ import annotations

import asyncio
import signal
import time
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio
import pytest
from google.rpc import status_pb2

from agentmesh.common.v1 import common_pb2
from services.runtime.status_decode import rich_error_of, rich_error_of_status
from tests.support import turns
from tests.support.process_mesh import AUTH, MeshShape, ProcessMesh
from tests.support.processes import ServiceProcess, eventually_async

SHAPE = MeshShape(replicas=2, routers=2)
WORKERS = 6
#: Answer length: 120 tokens at 10 ms a step, so a turn is in flight for over a second.
TOKENS = 120
IN_FLIGHT = {
    "sim-0": ("agentmesh_inference_running_requests", {}),
    "router-0": ("agentmesh_rpc_server_in_flight", {"grpc_method": "Converse"}),
    "tools": ("agentmesh_rpc_server_in_flight", {"grpc_method": "Execute"}),
    "gateway": ("agentmesh_rpc_server_in_flight", {"grpc_method": "Converse"}),
}


@dataclass
class Load:
    """Workers running turns back to back on fresh streams; every turn must end with its TurnCompleted."""

    stub: Any
    tool_choice: Any
    done: list[tuple[float, Any]] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def worker(self, n: int) -> None:
        i = 0
        while not self.stop.is_set():
            request = turns.start(
                f"load {n}-{i}", max_tokens=TOKENS, tool_choice=self.tool_choice, system_prompt=f"You are worker {n}."
            )
            events = await turns.one_turn(self.stub, request, AUTH, within_s=60)
            self.done.append((time.monotonic(), turns.completed(events)))
            i += 1

    def after(self, moment: float) -> list[Any]:
        return [d for at, d in self.done if at > moment]


def victim_of(mesh: ProcessMesh, name: str) -> ServiceProcess:
    return next(s for s in mesh.services if s.name == name)


@pytest.mark.parametrize("name", ["sim-0", "router-0", "tools"])
async def test_sigterm_under_load_loses_no_stream_and_new_work_goes_on(mesh: ProcessMesh, name: str) -> None:
    victim = victim_of(mesh, name)
    metric, labels = IN_FLIGHT[name]
    async with mesh.channel() as channel:
        choice = turns.named_tool("unit_convert") if name == "tools" else turns.NO_TOOLS
        load = Load(mesh.stub(channel), choice)
        workers = [asyncio.create_task(load.worker(n)) for n in range(WORKERS)]
        try:
            await eventually_async(lambda: has_work(victim, metric, labels), within_s=20, what=f"{name} busy")
            signalled = time.monotonic()
            victim.signal(signal.SIGTERM)
            assert await victim.wait_exit(30) == 0, victim.log_tail()
            exited = time.monotonic()
            # New work after the exit: every worker gets more turns through the rest of the mesh.
            await eventually_async(lambda: done_after(load, exited, WORKERS * 2), within_s=30, what="turns after exit")
        finally:
            load.stop.set()
            results = await asyncio.gather(*workers, return_exceptions=True)
    failures = [r for r in results if isinstance(r, BaseException)]
    assert not failures, f"streams lost while {name} drained: {failures!r}"
    around = load.after(signalled - 2.0)
    assert around, "no turn ran across the drain"
    # With one executor, calls made while it is gone fail in band (shown to the model); the turns still answer.
    answered = (common_pb2.FINISH_REASON_STOP, common_pb2.FINISH_REASON_LENGTH)
    bad = [describe(d) for d in around if d.finish_reason not in answered or d.status]
    assert not bad, f"{len(bad)} of {len(around)} turns across the drain did not answer: {bad[:3]}"


async def test_sigterm_the_gateway_finishes_its_streams_and_refuses_new_ones(mesh: ProcessMesh) -> None:
    gateway = mesh.gateway
    async with mesh.channel() as channel:
        stub = mesh.stub(channel)
        calls: list[Any] = []
        for n in range(WORKERS):
            call = stub.Converse(metadata=AUTH, timeout=60)
            await call.write(turns.start(f"in flight {n}", max_tokens=300))
            first = await turns.next_message(call)
            assert first.HasField("turn_accepted"), describe(first.turn_completed)
            calls.append(call)
        gateway.signal(signal.SIGTERM)
        # New streams are refused (a load balancer sends them to another gateway)...
        refused: list[grpc.aio.AioRpcError] = []

        async def refused_now() -> bool:
            try:
                await turns.one_turn(mesh.stub(channel), turns.start("new", max_tokens=2), AUTH, within_s=10)
            except grpc.aio.AioRpcError as exc:
                refused.append(exc)
                return True
            return False

        await eventually_async(refused_now, within_s=15, what="new streams refused while draining")
        assert refused[-1].code() == grpc.StatusCode.UNAVAILABLE, rich_error_of(refused[-1])
        # ...while every stream in flight finishes its turn.
        for call in calls:
            events = await turns.read_turn(call, within_s=30)
            assert turns.completed(events).finish_reason == common_pb2.FINISH_REASON_LENGTH
            assert not turns.completed(events).status
            await call.done_writing()
            assert await call.code() == grpc.StatusCode.OK
    assert await gateway.wait_exit(30) == 0, gateway.log_tail()


def describe(done: Any) -> str:
    status = rich_error_of_status(status_pb2.Status.FromString(done.status)) if done.status else None
    return f"{common_pb2.FinishReason.Name(done.finish_reason)} {status}"


async def has_work(service: ServiceProcess, metric: str, labels: dict[str, str]) -> bool:
    return await service.metric(metric, 0.0, **labels) > 0


async def done_after(load: Load, moment: float, count: int) -> bool:
    return len(load.after(moment)) >= count
