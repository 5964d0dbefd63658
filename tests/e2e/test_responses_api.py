"""The Responses API (``/v1/responses``) through the real mesh on the embedded model, with the openai SDK and the
OpenAI Agents SDK's default Responses model.

Two gateways, each with its HTTP edge, in front of one router and the session's vLLM replica, sharing Redis:
a response created through one is read back through the other, since the state is the session log and the
response records in Redis, not a gateway's memory. The router's response cache is off, so every response is
generated.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import httpx
import openai
import pytest
import redis.asyncio as aioredis

from gateway.build import build_gateway, load_keys
from gateway.config import GatewayConfig
from gateway.http_edge import HttpEdge
from gateway.responses_store import RedisResponseRecords, ResponseStore
from services.router.build import build_router, router_interceptors
from services.router.config import RouterConfig
from services.runtime.cache import TwoLevelCache
from services.runtime.config import ServiceConfig
from services.runtime.metrics import Metrics
from services.runtime.server import MeshServer
from services.tools.builtin import default_tools
from services.tools.executor import ToolExecutor
from services.tools.registry import ToolRegistry
from services.tools.servicer import ToolExecutorServicer
from tests.conftest import REDIS_URL
from tests.e2e.conftest import VllmReplica
from tests.e2e.test_agent_frameworks import DESCRIPTION, ORDER_TOOL, PROMPT, SYSTEM, order_status

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(600)]

KEY = "responses-secret-key"
OTHER_KEY = "responses-other-tenant-key"
MODEL = "SmolLM2-135M-Instruct"
#: The order tool as the Responses API spells a function tool (flat, not under "function").
RESPONSES_TOOL: dict[str, Any] = {"type": "function", **ORDER_TOOL["function"]}


@dataclass
class Edges:
    first: str
    second: str


@pytest.fixture(scope="module")
async def edges(vllm_replica: VllmReplica) -> AsyncIterator[Edges]:
    """Tool executor and router on the session's replica; two gateways with their edges, sharing Redis."""
    redis = aioredis.Redis.from_url(REDIS_URL)
    executor = ToolExecutor(ToolRegistry(default_tools()), cache=TwoLevelCache("test:responses:", redis))
    tools = MeshServer(ServiceConfig(port=0), [ToolExecutorServicer(executor).service()], metrics=Metrics())
    await tools.start()
    config = replace(
        RouterConfig(), port=0, inference=(vllm_replica.server.address,), tools=tools.address, response_cache_ttl_s=0
    )
    metrics = Metrics()
    router = build_router(config, redis, metrics)
    router_server = MeshServer(config, router.services(), metrics=metrics, interceptors=router_interceptors())
    await router_server.start()
    await router.start()
    assert await router.replicas.wait_any(30)
    gateway_config = replace(
        GatewayConfig(),
        port=0,
        routers=(router_server.address,),
        api_keys=f"responses:{KEY},other:{OTHER_KEY}",
        rate_limit_backend="memory",
    )
    started: list[tuple[MeshServer, Any, HttpEdge]] = []
    for _ in range(2):
        keys = load_keys(gateway_config)
        gateway = build_gateway(gateway_config, keys, None, Metrics(), None)
        server = MeshServer(
            gateway_config, [gateway.servicer.service()], metrics=Metrics(), interceptors=[gateway.auth]
        )
        await server.start()
        gateway.routers.start()
        assert await gateway.routers.wait_healthy(10)
        store = ResponseStore(RedisResponseRecords(redis, "test:responses:"), keys.tenant_for, ttl_s=600)
        http = HttpEdge(server.address, timeout_s=300, completion_model=MODEL, responses=store)
        await http.start("127.0.0.1", 0, grace_s=0)
        started.append((server, gateway, http))
    yield Edges(*(f"http://127.0.0.1:{http.port}/v1" for _, _, http in started))
    for server, gateway, http in started:
        await http.close()
        await server.drain(grace=0)
        await gateway.routers.close()
    await router_server.drain(grace=0)
    await router.close()
    await tools.drain(grace=0)
    await redis.aclose()


def sdk(url: str, key: str = KEY) -> Any:
    """The SDK's client, untyped: its overloads on ``stream`` and its item unions are not what these tests check."""
    return openai.AsyncOpenAI(base_url=url, api_key=key, max_retries=0, timeout=300)


async def test_create_whole_and_streamed_retrieve_from_another_gateway_delete(edges: Edges) -> None:
    client = sdk(edges.first)
    whole = await client.responses.create(model=MODEL, input="What is the capital of France?")
    assert whole.status == "completed" and whole.id.startswith("resp_")
    assert "Paris" in whole.output_text, whole.output_text
    assert whole.usage is not None and whole.usage.output_tokens > 0
    assert [item.type for item in whole.output] == ["message"]

    stream = await client.responses.create(model=MODEL, input="What is the capital of France?", stream=True)
    events: list[Any] = [event async for event in stream]
    kinds = [e.type for e in events]
    assert kinds[:5] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    final = events[-1].response
    assert final.output_text == deltas == whole.output_text  # temperature 0: the same answer

    # Stored in Redis, over the session log: the other gateway reads it back, the same.
    again = await sdk(edges.second).responses.retrieve(final.id)
    assert again.output_text == final.output_text and again.status == "completed"
    items = await sdk(edges.second).responses.input_items.list(final.id)
    assert [(i.type, i.content[0].text) for i in items.data] == [("message", "What is the capital of France?")]

    with pytest.raises(openai.NotFoundError):  # tenant-scoped: another tenant's key does not see it
        await sdk(edges.first, OTHER_KEY).responses.retrieve(final.id)
    with pytest.raises(openai.NotFoundError):
        await sdk(edges.first, OTHER_KEY).responses.create(model=MODEL, input="Hi", previous_response_id=final.id)

    await client.responses.delete(final.id)
    with pytest.raises(openai.NotFoundError):
        await sdk(edges.second).responses.retrieve(final.id)
    with pytest.raises(openai.NotFoundError):
        await client.responses.create(model=MODEL, input="Hi", previous_response_id=final.id)

    unstored = await client.responses.create(model=MODEL, input="Say hello.", store=False, max_output_tokens=8)
    with pytest.raises(openai.NotFoundError):
        await client.responses.retrieve(unstored.id)


async def test_previous_response_id_continues_the_conversation(edges: Edges) -> None:
    client = sdk(edges.first)
    first = await client.responses.create(model=MODEL, input="Remember this code word: PINEAPPLE.")
    # From the other gateway: the conversation is the session log in Redis.
    second = await sdk(edges.second).responses.create(
        model=MODEL, input="What is the code word?", previous_response_id=first.id
    )
    assert "PINEAPPLE" in second.output_text, second.output_text
    assert second.previous_response_id == first.id
    assert second.usage is not None and first.usage is not None
    assert second.usage.input_tokens > first.usage.input_tokens


async def test_a_function_tool_round_trip(edges: Edges) -> None:
    client = sdk(edges.first)
    first = await client.responses.create(
        model=MODEL,
        instructions=SYSTEM,
        input=PROMPT,
        tools=[RESPONSES_TOOL],
    )
    calls = [item for item in first.output if item.type == "function_call"]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("get_order_status", {"order_id": "A1234"})]
    outputs = [
        {"type": "function_call_output", "call_id": c.call_id, "output": order_status(**json.loads(c.arguments))}
        for c in calls
    ]
    stream = await client.responses.create(
        model=MODEL,
        previous_response_id=first.id,
        input=outputs,
        tools=[RESPONSES_TOOL],
        stream=True,
    )
    events: list[Any] = [event async for event in stream]
    final = events[-1]
    assert final.type == "response.completed"
    assert [item.type for item in final.response.output] == ["message"]
    assert "deliver" in final.response.output_text.lower(), final.response.output_text


async def test_streamed_function_calls_carry_their_arguments(edges: Edges) -> None:
    stream = await sdk(edges.first).responses.create(
        model=MODEL,
        instructions=SYSTEM,
        input=PROMPT,
        tools=[RESPONSES_TOOL],
        stream=True,
    )
    events: list[Any] = [event async for event in stream]
    kinds = [e.type for e in events]
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    done = events[4]
    assert done.type == "response.function_call_arguments.done"
    assert json.loads(done.arguments) == {"order_id": "A1234"}


async def test_the_openai_agents_sdk_runs_to_a_final_answer(edges: Edges) -> None:
    from agents import Agent, OpenAIResponsesModel, RunConfig, Runner, function_tool

    asked: list[str] = []

    @function_tool
    def get_order_status(order_id: str) -> str:
        """Look up the shipping status of a customer's order by its order id."""
        asked.append(order_id)
        return order_status(order_id)

    assert get_order_status.description == DESCRIPTION
    model = OpenAIResponsesModel(model=MODEL, openai_client=sdk(edges.first))
    agent = Agent(name="Support", instructions=SYSTEM, model=model, tools=[get_order_status])
    result = await Runner.run(agent, PROMPT, max_turns=4, run_config=RunConfig(tracing_disabled=True))
    assert asked == ["A1234"]
    assert "deliver" in str(result.final_output).lower(), result.final_output


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": "Hi", "tools": [{"type": "function", "name": "bad name!"}]}, "tools[0].name"),
        (
            {"input": "Hi", "tools": [{"type": "mcp", "server_label": "x", "server_url": "http://evil"}]},
            "tools[0].server_url",
        ),
        ({"input": "Hi", "tools": [{"type": "mcp", "server_label": "nowhere"}]}, "tools[0].server_label"),
        ({"input": [{"type": "function_call_output", "call_id": "c1", "output": "x"}]}, "input[0].call_id"),
        ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input[0].content[0]"),
        ({"input": "Hi", "max_output_tokens": 0}, "max_output_tokens"),
        ({"input": "Hi", "temperature": 3}, "temperature"),
        ({"input": "Hi", "metadata": {"k": 1}}, "metadata.k"),
        ({"input": ""}, "input"),
    ],
)
async def test_bad_input_is_a_400_naming_the_field(edges: Edges, body: dict[str, Any], param: str) -> None:
    async with httpx.AsyncClient(base_url=edges.first, headers={"Authorization": f"Bearer {KEY}"}) as http:
        reply = await http.post("/responses", json={"model": MODEL, **body})
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"] == param, reply.json()


async def test_unknown_ids_and_keys(edges: Edges) -> None:
    async with httpx.AsyncClient(base_url=edges.first) as http:
        assert (await http.get("/responses/resp_" + "0" * 32)).status_code == 401
        headers = {"Authorization": f"Bearer {KEY}"}
        reply = await http.get("/responses/resp_" + "0" * 32, headers=headers)
        assert reply.status_code == 404 and reply.json()["error"]["type"] == "not_found_error"
        assert (await http.delete("/responses/nonsense", headers=headers)).status_code == 404
        reply = await http.post(
            "/responses", headers=headers, json={"model": MODEL, "input": "Hi", "previous_response_id": "resp_x"}
        )
        assert reply.status_code == 404 and "previous_response_id" in reply.json()["error"]["message"]
