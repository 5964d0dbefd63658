"""Mesh identity: internal servers take only mTLS peers, and the router only calls that name a tenant."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import grpc
import grpc.aio
import pytest
import redis.asyncio as aioredis
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentmesh.agent.v1 import agent_pb2, agent_pb2_grpc
from meshkit.mesh import Mesh, start_mesh
from services.runtime.channel import create_channel
from services.runtime.config import ConfigError, ServiceConfig, load_config
from services.runtime.health import wait_serving
from services.runtime.metrics import Metrics
from services.runtime.server import MeshServer
from services.runtime.status_decode import rich_error_of
from services.runtime.tls import MeshTls
from tests.support.certs import make_ca, make_member, write_member
from tests.support.probe_agent import ProbeAgent

COMPLETE = agent_pb2.CompleteRequest(prompt="echo:hello mesh")


async def _complete(channel: grpc.aio.Channel) -> str:
    stub = agent_pb2_grpc.AgentServiceStub(channel)
    out = [m async for m in stub.Complete(COMPLETE, timeout=5)]
    return "".join(m.text_delta.text for m in out if m.HasField("text_delta"))


@pytest.fixture
async def tls_server(tmp_path: Path) -> AsyncIterator[tuple[MeshServer, MeshTls, MeshTls]]:
    """A server with mesh mTLS and a plaintext health port; a client member of the same mesh."""
    ca = make_ca()
    server_id, client_id = make_member(ca, "router"), make_member(ca, "gateway")
    cert, key, root = write_member(server_id, tmp_path)
    config = load_config(
        ServiceConfig, ["--tls-cert", str(cert), "--tls-key", str(key), "--tls-ca", str(root), "--health-port", "0"]
    )
    config = replace(config, host="127.0.0.1", port=0)
    server = MeshServer(config, [ProbeAgent().service()], metrics=Metrics(), tls=MeshTls.from_config(config))
    await server.start()
    yield server, server_id, client_id
    await server.drain(grace=0)


async def test_a_mesh_member_is_served_over_mutual_tls(tls_server: tuple[MeshServer, MeshTls, MeshTls]) -> None:
    server, _, client = tls_server
    await wait_serving(f"localhost:{server.port}", within_s=10, tls=client)
    async with create_channel(f"localhost:{server.port}", tls=client) as channel:
        assert await _complete(channel) == "hellomesh"
    named = replace(client, server_name="mesh.agentmesh.test")  # dialled by IP, checked by the mesh-wide name
    async with create_channel(f"127.0.0.1:{server.port}", tls=named) as channel:
        assert await _complete(channel) == "hellomesh"


async def test_callers_without_a_mesh_certificate_are_refused(tls_server: tuple[MeshServer, MeshTls, MeshTls]) -> None:
    server, server_id, _ = tls_server
    stranger = make_member(make_ca("another CA"), "intruder")
    target = f"localhost:{server.port}"
    attempts = {
        "plaintext": grpc.aio.insecure_channel(target),
        "TLS without a client certificate": grpc.aio.secure_channel(
            target, grpc.ssl_channel_credentials(server_id.root_ca)
        ),
        "a certificate from another CA": grpc.aio.secure_channel(
            target, grpc.ssl_channel_credentials(server_id.root_ca, stranger.private_key, stranger.cert_chain)
        ),
    }
    for what, channel in attempts.items():
        async with channel:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await _complete(channel)
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE, what


async def test_probes_get_plaintext_health_on_their_own_port_and_nothing_else(
    tls_server: tuple[MeshServer, MeshTls, MeshTls],
) -> None:
    server, _, _ = tls_server
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.health_port}") as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service="liveness"))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await _complete(channel)
        assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_mutual_tls_needs_all_three_files(tmp_path: Path) -> None:
    cert, _, _ = write_member(make_member(make_ca(), "x"), tmp_path)
    with pytest.raises(ConfigError, match="--tls-ca, --tls-key: mutual TLS needs all of"):
        load_config(ServiceConfig, ["--tls-cert", str(cert)])
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(ServiceConfig, ["--tls-cert", "/nope", "--tls-key", "/nope", "--tls-ca", "/nope"])


@pytest.fixture
async def mesh(redis_client: aioredis.Redis) -> AsyncIterator[Mesh]:
    m = await start_mesh(redis_client, replicas=1)
    await m.add_router()
    yield m
    await m.close()


async def test_the_router_refuses_a_call_without_a_tenant(mesh: Mesh) -> None:
    # Before: no x-agentmesh-tenant meant tenant "default", readable by anyone who reached the port.
    _, server, _ = mesh.routers[-1]
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        for metadata, reason in (((), "TENANT_MISSING"), ((("x-agentmesh-tenant", "a:b"),), "TENANT_INVALID")):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.GetSession(agent_pb2.GetSessionRequest(session_id="s1"), metadata=metadata)
            rich = rich_error_of(err.value)
            assert rich.code == grpc.StatusCode.UNAUTHENTICATED and rich.reason == reason
            assert "x-agentmesh-tenant" in rich.message
        # Probes stay open.
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
