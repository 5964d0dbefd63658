"""gRPC interop cases (after grpc/interop's test list) against the gateway process and through a real Envoy."""

from __future__ import annotations

import asyncio
import subprocess
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
import yaml

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from meshkit.up import free_port
from tests.e2e.test_envoy import ENVOY, envoy_config
from tests.support import turns
from tests.support.process_mesh import AUTH, MeshShape, ProcessMesh
from tests.support.processes import eventually_async

SHAPE = MeshShape(replicas=1, routers=1)
#: Unicode, percent signs and colons: what grpc-message percent-encoding must carry through every hop.
SPECIAL = "ünï-cødé_☃%20:\u00e9\u4e2d"


@pytest.fixture(scope="module")
async def envoy(mesh: ProcessMesh, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    """The shipped Envoy config in front of the mesh's gateway; its listener address."""
    listen, admin = free_port(), free_port()
    config = tmp_path_factory.mktemp("envoy") / "envoy.yaml"
    config.write_text(yaml.safe_dump(envoy_config(mesh.gateway.port, listen, admin)))
    log = (Path(config).parent / "envoy.log").open("w")
    proc = subprocess.Popen(  # noqa: ASYNC220 - Envoy runs beside the tests
        [ENVOY, "-c", str(config), "--log-level", "warning", "--base-id", str(listen)], stdout=log, stderr=log
    )
    try:
        deadline = time.monotonic() + 30
        healthy = f"gateway::127.0.0.1:{mesh.gateway.port}::health_flags::healthy"
        url = f"http://127.0.0.1:{admin}/clusters"
        while True:
            try:
                if healthy in await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=2).read().decode()):
                    break
            except OSError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "Envoy did not mark the gateway healthy"
            await asyncio.sleep(0.2)
        yield f"127.0.0.1:{listen}"
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


@pytest.fixture(params=["gateway", "envoy"])
def target(request: pytest.FixtureRequest, mesh: ProcessMesh) -> str:
    """Where the case's client connects (sync: it pulls the async Envoy fixture in only when asked)."""
    if request.param == "gateway":
        return mesh.gateway.address
    address: str = request.getfixturevalue("envoy")
    return address


async def idle(mesh: ProcessMesh) -> bool:
    """Nothing admitted, no stream open at the router, no generation running: the call left nothing behind."""
    streams = await mesh.routers[0].metric("agentmesh_rpc_server_in_flight", 0.0, grpc_method="Converse")
    return (
        await mesh.gateway.metric("agentmesh_gateway_in_flight") == 0 and streams == 0 and not await mesh.unfinished()
    )


async def test_empty_stream(mesh: ProcessMesh, target: str) -> None:
    async with mesh.channel(target) as channel:
        call: Any = mesh.stub(channel).Converse(metadata=AUTH, timeout=10)
        await call.done_writing()
        assert await call.read() is grpc.aio.EOF
        assert await call.code() == grpc.StatusCode.OK


async def test_ping_pong(mesh: ProcessMesh, target: str) -> None:
    async with mesh.channel(target) as channel:
        call: Any = mesh.stub(channel).Converse(metadata=AUTH, timeout=30)
        session = ""
        for i in range(4):
            await call.write(turns.start(f"ping {i}", turn_id=f"pp-{i}", session_id=session, max_tokens=3))
            events = await turns.read_turn(call)
            session = events[0].turn_accepted.session_id
            assert turns.completed(events).turn_id == f"pp-{i}" and turns.completed(events).usage.completion_tokens == 3
        await call.done_writing()
        assert await call.code() == grpc.StatusCode.OK


async def test_custom_metadata(mesh: ProcessMesh, target: str) -> None:
    async with mesh.channel(target) as channel:
        mine = "interop-" + SPECIAL.encode().hex()[:24]
        request = agent_pb2.CompleteRequest(prompt="hi", sampling=common_pb2.SamplingParams(max_tokens=2))
        call: Any = mesh.stub(channel).Complete(request, metadata=(*AUTH, ("x-request-id", mine)), timeout=10)
        messages = [m async for m in call]
        assert messages[-1].HasField("finished")
        assert dict(await call.trailing_metadata())["x-request-id"] == mine  # echoed through every hop


async def test_status_code_and_message_with_special_characters(mesh: ProcessMesh, target: str) -> None:
    async with mesh.channel(target) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await mesh.stub(channel).GetSession(
                agent_pb2.GetSessionRequest(session_id=SPECIAL), metadata=AUTH, timeout=10
            )
    assert failed.value.code() == grpc.StatusCode.NOT_FOUND
    assert SPECIAL in (failed.value.details() or ""), failed.value.details()


async def test_unimplemented_method(mesh: ProcessMesh, target: str) -> None:
    async with mesh.channel(target) as channel:
        for method in ("/agentmesh.agent.v1.AgentService/NoSuchMethod", "/no.such.Service/Call"):
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                unknown: Any = channel.unary_unary(method)  # no stub exists for a method nobody serves
                await unknown(b"", metadata=AUTH, timeout=10)
            assert failed.value.code() == grpc.StatusCode.UNIMPLEMENTED, method


async def test_cancel_after_begin(mesh: ProcessMesh, target: str) -> None:
    async with mesh.channel(target) as channel:
        call: Any = mesh.stub(channel).Converse(metadata=AUTH, timeout=10)
        await call.wait_for_connection()
        call.cancel()
        assert await call.code() == grpc.StatusCode.CANCELLED
    await eventually_async(lambda: idle(mesh), within_s=10, what="nothing left after cancel")


async def test_cancel_after_first_response(mesh: ProcessMesh, target: str) -> None:
    async with mesh.channel(target) as channel:
        call: Any = mesh.stub(channel).Converse(metadata=AUTH, timeout=30)
        await call.write(turns.start("long", max_tokens=300))
        assert (await call.read()).HasField("turn_accepted")
        call.cancel()
        assert await call.code() == grpc.StatusCode.CANCELLED
    await eventually_async(lambda: idle(mesh), within_s=10, what="turn and generation gone after cancel")


async def test_timeout_on_sleeping_server(mesh: ProcessMesh, target: str) -> None:
    async with mesh.channel(target) as channel:
        call: Any = mesh.stub(channel).Converse(metadata=AUTH, timeout=0.5)
        await call.write(turns.start("a 3 s answer", max_tokens=300))
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await turns.read_turn(call, within_s=10)
        assert failed.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    await eventually_async(lambda: idle(mesh), within_s=10, what="turn and generation gone after the deadline")
