"""The gateway's public surface: an allow-list of open methods, and fuzzed requests that end in precise statuses."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
import pytest
import redis.asyncio as aioredis
from google.rpc import error_details_pb2, status_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from gateway.auth import ApiKeys, AuthInterceptor
from meshkit.mesh import Mesh, start_mesh
from services.runtime.config import ServiceConfig
from services.runtime.metrics import Metrics
from services.runtime.server import MeshServer, Service
from services.runtime.status_decode import rich_error_of

ACME = (("authorization", "Bearer acme-secret-key"),)
#: Statuses a malformed or unlucky request may end with; never INTERNAL or UNKNOWN.
PRECISE = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.RESOURCE_EXHAUSTED}


def _extra_service() -> Service:
    """A service outside /agentmesh., as a later addition might be."""

    async def ping(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        return b"pong"

    handler: grpc.RpcMethodHandler[bytes, bytes] = grpc.unary_unary_rpc_method_handler(ping)
    generic = grpc.method_handlers_generic_handler("acme.admin.v1.Admin", {"Ping": handler})
    return Service("acme.admin.v1.Admin", lambda server: server.add_generic_rpc_handlers((generic,)))


async def test_auth_is_an_allow_list_so_services_added_later_need_a_key() -> None:
    keys = ApiKeys.load(None, "acme:acme-secret-key")
    server = MeshServer(
        ServiceConfig(port=0), [_extra_service()], metrics=Metrics(), interceptors=[AuthInterceptor(keys)]
    )
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            ping: Any = channel.unary_unary("/acme.admin.v1.Admin/Ping")
            # Before: only names under /agentmesh. were guarded, so this went through.
            for metadata in ((), (("authorization", "Bearer wrong-key-1234"),), (("authorization", "Basic x"),)):
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await ping(b"", metadata=metadata)
                assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert await ping(b"", metadata=ACME) == b"pong"
    finally:
        await server.drain(grace=0)


@pytest.fixture
async def gateway(redis_client: aioredis.Redis) -> AsyncIterator[Any]:
    mesh: Mesh = await start_mesh(redis_client, replicas=1)
    await mesh.add_router()
    stub, _, _ = await mesh.add_gateway(rate_rps=10_000.0, rate_burst=10_000.0)
    yield stub
    await mesh.close()


text = st.text(max_size=200)
floats = st.floats(allow_nan=True, allow_infinity=True, width=32)
sampling = st.builds(
    common_pb2.SamplingParams,
    temperature=floats,
    top_p=floats,
    top_k=st.integers(0, 2**31 - 1),
    max_tokens=st.integers(0, 2**31 - 1),
    stop=st.lists(st.text(max_size=8), max_size=10),
)
priority = st.integers(0, 5)  # unknown enum values too
complete = st.builds(agent_pb2.CompleteRequest, prompt=text, system_prompt=text, sampling=sampling, priority=priority)
get_session = st.builds(agent_pb2.GetSessionRequest, session_id=text)
start_turn = st.builds(
    agent_pb2.StartTurn,
    message=text,
    session_id=text,
    turn_id=text,
    max_tool_rounds=st.integers(0, 2**31 - 1),
    tool_choice=st.builds(agent_pb2.ToolChoice, mode=st.integers(0, 6), tool_name=st.text(max_size=20)),
    sampling=sampling,
    priority=priority,
)


def assert_precise(err: grpc.aio.AioRpcError) -> None:
    rich = rich_error_of(err)
    assert rich.code in PRECISE, f"{rich.code}: {rich.message}"
    if rich.code == grpc.StatusCode.INVALID_ARGUMENT:
        assert rich.field_violations and all(v.field for v in rich.field_violations), rich.message


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(request=complete)
async def test_fuzzed_complete_requests_end_in_precise_statuses(gateway: Any, request: Any) -> None:
    try:
        out = [m async for m in gateway.Complete(request, metadata=ACME, timeout=20)]
        assert out[-1].HasField("finished")
    except grpc.aio.AioRpcError as err:
        assert_precise(err)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(request=get_session)
async def test_fuzzed_session_reads_end_in_precise_statuses(gateway: Any, request: Any) -> None:
    try:
        await gateway.GetSession(request, metadata=ACME, timeout=20)
    except grpc.aio.AioRpcError as err:
        assert_precise(err)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(start=start_turn)
async def test_fuzzed_turns_end_in_precise_statuses(gateway: Any, start: Any) -> None:
    call = gateway.Converse(metadata=ACME, timeout=20)
    try:
        await call.write(agent_pb2.ConverseRequest(start_turn=start))
        while True:
            event = await call.read()
            if event is grpc.aio.EOF or event.HasField("turn_completed"):
                break
        # A rejected turn may also end as TurnCompleted carrying a google.rpc.Status (issue 13's contract).
        raw = getattr(event.turn_completed, "status", b"") if event is not grpc.aio.EOF else b""
        if raw:
            status = status_pb2.Status.FromString(raw)
            assert status.code not in (grpc.StatusCode.INTERNAL.value[0], grpc.StatusCode.UNKNOWN.value[0]), status
            if status.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]:
                assert any(d.Is(error_details_pb2.BadRequest.DESCRIPTOR) for d in status.details), status
    except grpc.aio.AioRpcError as err:
        assert_precise(err)
    finally:
        call.cancel()


async def test_list_tools_needs_nothing_but_a_key(gateway: Any) -> None:
    assert (await gateway.ListTools(agent_pb2.ListToolsRequest(), metadata=ACME)).tools
