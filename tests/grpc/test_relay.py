"""The gateway → router Relay stream: Complete requests multiplexed on one call per router, on real servers.

Through a gateway: many Completes share one Relay call, give the same text as a call of their own, keep
their errors (status, message, field) and are cancelled at the router when their client goes away; a
draining router takes no new request; a router lost before the answer is failed over. On a raw Relay
stream to a router: every per-request check a call's metadata would get (tenant, id, deadline), and
requests that advance together leave in one message.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace

import grpc
import grpc.aio
import pytest
import redis.asyncio as aioredis
from google.rpc import status_pb2

from agentmesh.agent.v1 import agent_pb2, agent_pb2_grpc, relay_pb2, relay_pb2_grpc
from agentmesh.common.v1 import common_pb2
from gateway.router_link import RouterLink
from meshkit.mesh import FAST_SIM, Mesh, start_mesh
from services.runtime.mux_client import StreamDown
from services.runtime.protoutil import duration
from services.runtime.status_decode import code_from_number, rich_error_of, rich_error_of_status
from tests.support.waiting import eventually

ACME = (("authorization", "Bearer acme-secret-key"),)


def _metric(mesh: Mesh, name: str, **labels: str) -> float:
    value = mesh.routers[0][1].metrics.registry.get_sample_value(name, labels)
    return value or 0.0


async def _complete(stub: agent_pb2_grpc.AgentServiceAsyncStub, prompt: str, **kw: object) -> tuple[str, list[str]]:
    text: list[str] = []
    kinds: list[str] = []
    async for event in stub.Complete(agent_pb2.CompleteRequest(prompt=prompt, **kw), metadata=ACME):  # type: ignore[arg-type]
        kinds.append(str(event.WhichOneof("event")))
        if event.HasField("text_delta"):
            text.append(event.text_delta.text)
    return "".join(text), kinds


@pytest.fixture
async def mesh(redis_client: aioredis.Redis) -> AsyncIterator[Mesh]:
    m = await start_mesh(redis_client, replicas=1)
    await m.add_router()
    yield m
    await m.close()


async def test_many_completes_share_one_relay_call_and_match_direct_calls(mesh: Mesh) -> None:
    stub, _, _ = await mesh.add_gateway()
    router_stub = agent_pb2_grpc.AgentServiceStub(mesh.routers[0][2])
    prompts = [f"Tell me about the number {i}" for i in range(12)]
    relayed = await asyncio.gather(*(_complete(stub, p) for p in prompts))
    direct = []
    for p in prompts:  # the router's own Complete, a call per request
        text = []
        async for event in router_stub.Complete(agent_pb2.CompleteRequest(prompt=p)):
            if event.HasField("text_delta"):
                text.append(event.text_delta.text)
        direct.append("".join(text))
    assert [t for t, _ in relayed] == direct and all(direct)
    assert all(kinds[0] == "started" and kinds[-1] == "finished" for _, kinds in relayed)
    relay_calls = _metric(
        mesh,
        "agentmesh_rpc_server_started_total",
        grpc_service="agentmesh.agent.v1.RelayService",
        grpc_method="Relay",
        grpc_type="stream_stream",
    )
    assert relay_calls == 1  # one stream from the gateway, however many requests
    completes = _metric(
        mesh,
        "agentmesh_rpc_server_handled_total",
        grpc_service="agentmesh.agent.v1.AgentService",
        grpc_method="Complete",
        grpc_type="unary_stream",
        grpc_code="OK",
    )
    assert completes == len(prompts) * 2  # relayed requests count as Complete calls, like the direct ones


async def test_a_relayed_error_keeps_its_status_message_and_field(mesh: Mesh) -> None:
    stub, _, _ = await mesh.add_gateway()
    bad = agent_pb2.CompleteRequest(prompt="hi", sampling=common_pb2.SamplingParams(top_p=5))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        async for _ in stub.Complete(bad, metadata=ACME):
            pass
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    rich = rich_error_of(err.value)
    assert [v.field for v in rich.field_violations] == ["sampling.top_p"] and rich.request_id
    assert "top_p" in (err.value.details() or "")


async def test_a_client_that_leaves_cancels_its_request_at_the_router(redis_client: aioredis.Redis) -> None:
    slow = await start_mesh(redis_client, replicas=1, sim=replace(FAST_SIM, output_tokens=400, decode_base_s=0.02))
    try:
        await slow.add_router()
        stub, _, _ = await slow.add_gateway()
        call = stub.Complete(agent_pb2.CompleteRequest(prompt="a long story"), metadata=ACME)
        async for event in call:
            if event.HasField("text_delta"):
                break
        assert slow.unfinished() == 1
        call.cancel()
        await eventually(lambda: slow.unfinished() == 0, what="the replica dropping the abandoned request")
        text, kinds = await _complete(stub, "and another")  # the shared stream carries on
        assert text and kinds[-1] == "finished"
    finally:
        await slow.close()


async def test_a_draining_router_gets_no_new_request(redis_client: aioredis.Redis) -> None:
    mesh = await start_mesh(redis_client, replicas=1)
    try:
        await mesh.add_router()
        await mesh.add_router()
        stub, gateway, _ = await mesh.add_gateway()
        links = [gateway.routers.link(t) for t in gateway.routers.targets]
        for router, _, _ in mesh.routers:
            await router.relay.announce_draining()
        await eventually(lambda: all(link.draining for link in links), what="both links seeing the drain notice")
        with pytest.raises(StreamDown):
            async for _ in links[0].complete(relay_pb2.RelayStart(id="x", tenant="acme")):
                pass
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await _complete(stub, "nobody takes this")
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "no router took the request" in (err.value.details() or "")
    finally:
        await mesh.close()


async def test_requests_fail_over_when_a_router_goes_away(redis_client: aioredis.Redis) -> None:
    mesh = await start_mesh(redis_client, replicas=1)
    try:
        await mesh.add_router()
        await mesh.add_router()
        stub, gateway, _ = await mesh.add_gateway()
        await mesh.routers[0][1].drain(grace=0)  # gone: its Relay stream breaks, its health check fails
        answers = await asyncio.gather(*(_complete(stub, f"question {i}") for i in range(6)))
        assert all(text and kinds[-1] == "finished" for text, kinds in answers)
        assert not gateway.routers.link(mesh.routers[0][1].address).connected
    finally:
        await mesh.close()


# -- a raw Relay stream to a router -------------------------------------------------------------


async def _relay(
    mesh: Mesh,
) -> tuple[grpc.aio.Channel, grpc.aio.StreamStreamCall[relay_pb2.RelayRequest, relay_pb2.RelayResponse]]:
    channel = grpc.aio.insecure_channel(mesh.routers[0][1].address)  # no tenant header: Relay names it per request
    call = relay_pb2_grpc.RelayServiceStub(channel).Relay()
    first = await call.read()
    assert isinstance(first, relay_pb2.RelayResponse) and first.HasField("ready")
    return channel, call


async def _ends(
    call: grpc.aio.StreamStreamCall[relay_pb2.RelayRequest, relay_pb2.RelayResponse], n: int
) -> tuple[dict[str, relay_pb2.RelayFrame], int]:
    """Read until ``n`` requests ended: their last frames by id, and how many messages that took."""
    ended: dict[str, relay_pb2.RelayFrame] = {}
    messages = 0
    while len(ended) < n:
        message = await call.read()
        assert isinstance(message, relay_pb2.RelayResponse)
        messages += 1
        for frame in message.frames.frames:
            if frame.end:
                ended[frame.id] = frame
    return ended, messages


async def test_each_relayed_request_is_checked_like_a_call(mesh: Mesh) -> None:
    channel, call = await _relay(mesh)
    try:
        ok = agent_pb2.CompleteRequest(prompt="hello")
        starts = {
            "no-tenant": relay_pb2.RelayStart(id="no-tenant", request=ok),
            "bad-tenant": relay_pb2.RelayStart(id="bad-tenant", request=ok, tenant="a:b"),
            "bad-field": relay_pb2.RelayStart(
                id="bad-field", request=agent_pb2.CompleteRequest(prompt=" "), tenant="acme"
            ),
            "x" * 65: relay_pb2.RelayStart(id="x" * 65, request=ok, tenant="acme"),
        }
        for start in starts.values():
            await call.write(relay_pb2.RelayRequest(start=start))
        ended, _ = await _ends(call, len(starts))
        codes = {rid: code_from_number(status_pb2.Status.FromString(f.status).code) for rid, f in ended.items()}
        assert codes == {
            "no-tenant": grpc.StatusCode.UNAUTHENTICATED,
            "bad-tenant": grpc.StatusCode.UNAUTHENTICATED,
            "bad-field": grpc.StatusCode.INVALID_ARGUMENT,
            "x" * 65: grpc.StatusCode.INVALID_ARGUMENT,
        }
        field = rich_error_of_status(status_pb2.Status.FromString(ended["bad-field"].status)).field_violations
        assert [v.field for v in field] == ["prompt"]
        # The stream is still good for valid requests, and a cancel of an unknown id is ignored.
        await call.write(relay_pb2.RelayRequest(cancel=relay_pb2.RelayCancel(id="never")))
        await call.write(relay_pb2.RelayRequest(start=relay_pb2.RelayStart(id="fine", request=ok, tenant="acme")))
        ended, _ = await _ends(call, 1)
        assert ended["fine"].status == b""
    finally:
        call.cancel()
        await channel.close()


async def test_a_relayed_deadline_ends_that_request_only(redis_client: aioredis.Redis) -> None:
    slow = await start_mesh(redis_client, replicas=1, sim=replace(FAST_SIM, output_tokens=400, decode_base_s=0.02))
    try:
        await slow.add_router()
        channel, call = await _relay(slow)
        short = relay_pb2.RelayStart(
            id="short", request=agent_pb2.CompleteRequest(prompt="a long story"), tenant="acme", timeout=duration(0.3)
        )
        await call.write(relay_pb2.RelayRequest(start=short))
        ended, _ = await _ends(call, 1)
        assert (
            code_from_number(status_pb2.Status.FromString(ended["short"].status).code)
            == grpc.StatusCode.DEADLINE_EXCEEDED
        )
        await eventually(lambda: slow.unfinished() == 0, what="the replica aborting the expired request")
        call.cancel()
        await channel.close()
    finally:
        await slow.close()


async def test_requests_that_advance_together_leave_in_one_message(redis_client: aioredis.Redis) -> None:
    """Eight answers of 40 tokens at 20 ms a token: what advances in one loop turn leaves in one message (a
    message per request per delivery — started, first text, about 8 flush ticks, end — would be about 80;
    this measured 19, and 26 with per-request rather than shared flush ticks)."""
    paced = await start_mesh(redis_client, replicas=1, sim=replace(FAST_SIM, output_tokens=40, decode_base_s=0.02))
    try:
        await paced.add_router()
        channel, call = await _relay(paced)
        n = 8
        for i in range(n):
            request = agent_pb2.CompleteRequest(prompt="same prompt")
            await call.write(
                relay_pb2.RelayRequest(start=relay_pb2.RelayStart(id=f"r{i}", request=request, tenant="acme"))
            )
        ended, messages = await _ends(call, n)
        assert all(f.status == b"" for f in ended.values())
        assert messages <= 40, messages
        call.cancel()
        await channel.close()
    finally:
        await paced.close()


async def test_a_router_link_yields_the_events_as_the_router_serialized_them(mesh: Mesh) -> None:
    link = RouterLink(mesh.routers[0][1].address, grpc.aio.insecure_channel)
    link.start()
    try:
        assert await link.wait_connected(5)
        events = [
            e
            async for e in link.complete(
                relay_pb2.RelayStart(id="a", request=agent_pb2.CompleteRequest(prompt="hi"), tenant="acme")
            )
        ]
        kinds = [agent_pb2.CompleteResponse.FromString(e).WhichOneof("event") for e in events]
        assert kinds[0] == "started" and kinds[-1] == "finished"
    finally:
        await link.close()
