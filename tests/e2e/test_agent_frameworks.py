"""Agent frameworks, unchanged, running their own tool loop against the mesh's OpenAI edge on the embedded model.

Each framework defines a ``get_order_status(order_id)`` tool in the client; the mesh plans the call under
the tool's schema and hands it back as OpenAI ``tool_calls``; the framework runs it and sends the result,
and the mesh answers from it. The openai SDK (whole and streamed: the calls the SDK reassembles from the
chunks equal the whole answer's), the OpenAI Agents SDK (``Runner.run``), LangChain (``bind_tools``) and
pydantic-ai (``OpenAIChatModel`` on an ``OpenAIProvider`` with ``base_url``). The session's vLLM replica is
reused (no second engine); the router's response cache is off, so every request is generated.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import openai
import pytest
import redis.asyncio as aioredis

from gateway.build import build_gateway, load_keys
from gateway.config import GatewayConfig
from gateway.http_edge import HttpEdge
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

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(600)]

KEY = "frameworks-secret-key"
MODEL = "SmolLM2-135M-Instruct"
SYSTEM = "You are the support agent of an online shop. Look orders up with the tools."
PROMPT = "What is the status of my order A1234?"
DESCRIPTION = "Look up the shipping status of a customer's order by its order id."
ORDERS = {"A1234": {"order_id": "A1234", "status": "delivered", "delivered_on": "2025-03-14"}}
ORDER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_order_status",
        "description": DESCRIPTION,
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string", "description": "The order id, e.g. A1234"}},
            "required": ["order_id"],
            "additionalProperties": False,
        },
        "strict": True,
    },
}


def order_status(order_id: str) -> str:
    return json.dumps(ORDERS.get(order_id.strip(), {"order_id": order_id, "status": "unknown order"}))


@dataclass
class Edge:
    url: str


@pytest.fixture(scope="module")
async def edge(vllm_replica: VllmReplica) -> AsyncIterator[Edge]:
    """Tool executor, router and gateway on the session's replica, and the OpenAI edge in front."""
    redis = aioredis.Redis.from_url(REDIS_URL)
    executor = ToolExecutor(ToolRegistry(default_tools()), cache=TwoLevelCache("test:frameworks:", redis))
    tools = MeshServer(ServiceConfig(port=0), [ToolExecutorServicer(executor).service()], metrics=Metrics())
    await tools.start()
    config = replace(
        RouterConfig(),
        port=0,
        inference=(vllm_replica.server.address,),
        tools=tools.address,
        response_cache_ttl_s=0,
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
        api_keys=f"frameworks:{KEY}",
        rate_limit_backend="memory",
    )
    gateway = build_gateway(gateway_config, load_keys(gateway_config), None, Metrics(), None)
    gateway_server = MeshServer(
        gateway_config, [gateway.servicer.service()], metrics=Metrics(), interceptors=[gateway.auth]
    )
    await gateway_server.start()
    gateway.routers.start()
    assert await gateway.routers.wait_healthy(10)
    http = HttpEdge(gateway_server.address, timeout_s=300, completion_model=MODEL)
    await http.start("127.0.0.1", 0, grace_s=0)
    yield Edge(f"http://127.0.0.1:{http.port}/v1")
    await http.close()
    await gateway_server.drain(grace=0)
    await gateway.routers.close()
    await router_server.drain(grace=0)
    await router.close()
    await tools.drain(grace=0)
    await redis.aclose()


def sdk(edge: Edge) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=edge.url, api_key=KEY, max_retries=0, timeout=300)


@pytest.mark.parametrize("model", [MODEL, "agentmesh-agent"])
async def test_the_openai_sdk_runs_a_tool_loop_whole_and_streamed(edge: Edge, model: str) -> None:
    client = sdk(edge)
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT}]
    body: dict[str, Any] = {"model": model, "messages": messages, "tools": [ORDER_TOOL]}
    whole = (await client.chat.completions.create(**body)).choices[0]
    assert whole.finish_reason == "tool_calls", whole
    calls = whole.message.tool_calls or []
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("get_order_status", {"order_id": "A1234"})
    ]
    async with client.chat.completions.stream(**body) as stream:
        streamed = (await stream.get_final_completion()).choices[0]
    assert streamed.finish_reason == "tool_calls"
    assert [(c.type, c.function.name, c.function.arguments) for c in streamed.message.tool_calls or []] == [
        (c.type, c.function.name, c.function.arguments) for c in calls
    ]
    messages.append(whole.message.model_dump(exclude_none=True))
    messages += [
        {"role": "tool", "tool_call_id": c.id, "content": order_status(**json.loads(c.function.arguments))}
        for c in calls
    ]
    answer = (await client.chat.completions.create(**body)).choices[0]
    assert answer.finish_reason == "stop" and not answer.message.tool_calls
    assert "deliver" in (answer.message.content or "").lower(), answer.message.content


async def test_the_openai_agents_sdk_runs_to_a_final_answer(edge: Edge) -> None:
    from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool

    asked: list[str] = []

    @function_tool
    def get_order_status(order_id: str) -> str:
        """Look up the shipping status of a customer's order by its order id."""
        asked.append(order_id)
        return order_status(order_id)

    model = OpenAIChatCompletionsModel(model=MODEL, openai_client=sdk(edge))
    agent = Agent(name="Support", instructions=SYSTEM, model=model, tools=[get_order_status])
    result = await Runner.run(agent, PROMPT, max_turns=4, run_config=RunConfig(tracing_disabled=True))
    assert asked == ["A1234"]
    assert "deliver" in str(result.final_output).lower(), result.final_output


async def test_langchain_bind_tools_runs_a_tool_loop_whole_and_streamed(edge: Edge) -> None:
    from langchain_core.messages import AIMessageChunk, BaseMessage, HumanMessage, SystemMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    @tool
    def get_order_status(order_id: str) -> str:
        """Look up the shipping status of a customer's order by its order id."""
        return order_status(order_id)

    llm = ChatOpenAI(
        model=MODEL, base_url=edge.url, api_key=SecretStr(KEY), max_retries=0, timeout=300, use_responses_api=False
    )
    bound = llm.bind_tools([get_order_status])
    messages: list[BaseMessage] = [SystemMessage(SYSTEM), HumanMessage(PROMPT)]
    ai = await bound.ainvoke(messages)
    assert [(c["name"], c["args"]) for c in ai.tool_calls] == [("get_order_status", {"order_id": "A1234"})]
    gathered: AIMessageChunk | None = None
    async for chunk in bound.astream(messages):
        assert isinstance(chunk, AIMessageChunk)
        gathered = chunk if gathered is None else gathered + chunk
    assert gathered is not None
    assert [(c["name"], c["args"]) for c in gathered.tool_calls] == [(c["name"], c["args"]) for c in ai.tool_calls]
    messages += [ai, *(ToolMessage(get_order_status.invoke(c["args"]), tool_call_id=c["id"]) for c in ai.tool_calls)]
    final = await bound.ainvoke(messages)
    assert not final.tool_calls and "deliver" in str(final.content).lower(), final.content


async def test_pydantic_ai_runs_an_agent_with_a_tool(edge: Edge) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    asked: list[str] = []
    agent = Agent(OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=edge.url, api_key=KEY)), instructions=SYSTEM)

    @agent.tool_plain
    def get_order_status(order_id: str) -> str:
        """Look up the shipping status of a customer's order by its order id."""
        asked.append(order_id)
        return order_status(order_id)

    result = await agent.run(PROMPT)
    assert asked == ["A1234"]
    assert "deliver" in result.output.lower(), result.output
