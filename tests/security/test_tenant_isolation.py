"""Cross-tenant reads: sessions, response cache, tool cache and prefix cache, through the real services."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
import pytest
import redis.asyncio as aioredis
from opentelemetry import baggage, propagate
from opentelemetry import context as otel_context

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from agentmesh.tools.v1 import tools_pb2, tools_pb2_grpc
from meshkit.mesh import Mesh, start_mesh
from meshkit.turns import converse
from services.runtime.tenancy import TENANT_BAGGAGE
from tests.support.turns import next_message

ACME = (("authorization", "Bearer acme-secret-key"),)
OTHER = (("authorization", "Bearer other-secret-key"),)
NONE = agent_pb2.ToolChoice(mode=agent_pb2.TOOL_CHOICE_MODE_NONE)
SYSTEM = " ".join(f"policy{i}" for i in range(200))  # 200 simulator tokens: many full prefix-cache blocks


def as_tenant(tenant: str) -> tuple[tuple[str, str], ...]:
    return (("x-agentmesh-tenant", tenant),)


@pytest.fixture
async def mesh(redis_client: aioredis.Redis) -> AsyncIterator[Mesh]:
    m = await start_mesh(redis_client, replicas=1)  # one replica: every request meets the same prefix cache
    yield m
    await m.close()


async def finished(stub: Any, request: agent_pb2.CompleteRequest, metadata: Any) -> agent_pb2.CompleteFinished:
    out = [m async for m in stub.Complete(request, metadata=metadata)]
    done: agent_pb2.CompleteFinished = out[-1].finished
    return done


async def test_response_cache_hits_only_for_the_tenant_that_filled_it(mesh: Mesh) -> None:
    router = await mesh.add_router()
    request = agent_pb2.CompleteRequest(prompt=f"same question {uuid.uuid4().hex}")
    assert not (await finished(router, request, as_tenant("acme"))).cached
    assert (await finished(router, request, as_tenant("acme"))).cached  # the cache works
    # Before: the key left the tenant out, so "other" was told acme had asked this exact question.
    assert not (await finished(router, request, as_tenant("other"))).cached


async def test_prefix_cache_hits_only_within_a_tenant(mesh: Mesh) -> None:
    router = await mesh.add_router(response_cache_ttl_s=0)

    def ask(prompt: str) -> agent_pb2.CompleteRequest:
        return agent_pb2.CompleteRequest(system_prompt=SYSTEM, prompt=prompt)

    first = await finished(router, ask("first"), as_tenant("acme"))
    assert first.usage.cached_prompt_tokens == 0
    again = await finished(router, ask("second"), as_tenant("acme"))
    assert again.usage.cached_prompt_tokens >= 150  # the shared system prompt came from the cache
    # Before: no salt, so "other" saw acme's system prompt cached (and a shorter time to first token).
    other = await finished(router, ask("third"), as_tenant("other"))
    assert other.usage.cached_prompt_tokens == 0


async def test_an_operator_can_share_the_prefix_cache_on_purpose(mesh: Mesh) -> None:
    router = await mesh.add_router(response_cache_ttl_s=0, share_prefix_cache=True)
    await finished(router, agent_pb2.CompleteRequest(system_prompt=SYSTEM, prompt="a"), as_tenant("acme"))
    other = await finished(router, agent_pb2.CompleteRequest(system_prompt=SYSTEM, prompt="b"), as_tenant("other"))
    assert other.usage.cached_prompt_tokens >= 150


async def test_tool_cache_hits_only_for_the_tenant_that_filled_it(mesh: Mesh) -> None:
    async def call(tenant: str) -> tools_pb2.ToolResult:
        carrier: dict[str, str] = {}
        token = otel_context.attach(baggage.set_baggage(TENANT_BAGGAGE, tenant))
        try:
            propagate.inject(carrier)
        finally:
            otel_context.detach(token)
        async with grpc.aio.insecure_channel(mesh.tools_server.address) as channel:
            stream = tools_pb2_grpc.ToolExecutorServiceStub(channel).Execute()
            await stream.write(
                tools_pb2.ExecuteRequest(
                    call=tools_pb2.ToolCall(
                        call_id="c1", tool_name="calculator", arguments_json=expression, trace_context=carrier
                    )
                )
            )
            response = await next_message(stream)
            await stream.done_writing()
            result: tools_pb2.ToolResult = response.result
            return result

    expression = f'{{"expression": "{uuid.uuid4().int % 10_000} + 1"}}'
    assert not (await call("acme")).cached
    assert (await call("acme")).cached
    assert not (await call("other")).cached  # before: the key left the tenant out


async def test_through_the_gateway_a_tenant_header_from_the_client_is_ignored(mesh: Mesh) -> None:
    await mesh.add_router()
    stub, _, _ = await mesh.add_gateway()
    turn = await converse(stub, agent_pb2.StartTurn(message="my secret plan", tool_choice=NONE), metadata=ACME)
    sid = turn.accepted.session_id
    spoofed = (*OTHER, ("x-agentmesh-tenant", "acme"))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.GetSession(agent_pb2.GetSessionRequest(session_id=sid), metadata=spoofed)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    mine = await stub.GetSession(agent_pb2.GetSessionRequest(session_id=sid), metadata=ACME)
    assert [t.user_message for t in mine.session.turns] == ["my secret plan"]
    request = agent_pb2.CompleteRequest(prompt=f"q {uuid.uuid4().hex}", sampling=common_pb2.SamplingParams())
    await finished(stub, request, ACME)
    assert not (await finished(stub, request, spoofed)).cached
