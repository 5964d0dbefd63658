"""The OpenAI-compatible HTTP edge, driven by the real ``openai`` SDK, httpx and curl, in front of a real
gateway (in-process simulator mesh, real Redis)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import httpx
import openai
import pytest
import redis.asyncio as aioredis

from agentmesh_client import AgentClient
from gateway.http_edge import HttpEdge
from meshkit.mesh import FAST_SIM, Mesh, start_mesh
from tests.support.waiting import eventually

KEY = "acme-secret-key"
MODEL = "SmolLM2-135M-Instruct"
CALCULATOR = {"type": "function", "function": {"name": "calculator"}}


@dataclass
class Edge:
    url: str
    grpc: str


@pytest.fixture
async def mesh(redis_client: aioredis.Redis) -> AsyncIterator[Mesh]:
    m = await start_mesh(redis_client, replicas=1, sim=replace(FAST_SIM, output_tokens=200, decode_base_s=0.01))
    await m.add_router(response_cache_ttl_s=0)
    yield m
    await m.close()


@pytest.fixture
async def edges(mesh: Mesh) -> AsyncIterator[dict[str, Edge]]:
    """``default``, and ``limited`` in front of a gateway that allows one request, then 4 per second."""
    started: list[HttpEdge] = []
    out = {}
    limits: dict[str, dict[str, Any]] = {"default": {}, "limited": {"rate_rps": 4.0, "rate_burst": 1.0}}
    for name, overrides in limits.items():
        _, _, server = await mesh.add_gateway(rate_limit_backend="memory", **overrides)
        edge = HttpEdge(server.address, timeout_s=30, completion_model=MODEL)
        await edge.start("127.0.0.1", 0, grace_s=0)
        started.append(edge)
        out[name] = Edge(f"http://127.0.0.1:{edge.port}/v1", server.address)
    yield out
    for edge in started:
        await edge.close()


async def create(client: openai.AsyncOpenAI, **body: Any) -> Any:
    """``chat.completions.create`` with a body built at run time (the SDK's overloads want literal TypedDicts)."""
    return await client.chat.completions.create(**body)


async def create_raw(client: openai.AsyncOpenAI, **body: Any) -> Any:
    return await client.chat.completions.with_raw_response.create(**body)


def sdk(edge: Edge, key: str = KEY, retries: int = 0) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=edge.url, api_key=key, max_retries=retries, timeout=30)


async def test_models_and_a_completion_whole_and_streamed(edges: dict[str, Edge]) -> None:
    client = sdk(edges["default"])
    assert [m.id for m in (await client.models.list()).data] == ["agentmesh-agent", MODEL]
    whole = await create(
        client,
        model=MODEL,
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        max_tokens=5,
    )
    assert whole.choices[0].finish_reason == "length" and len(whole.choices[0].message.content.split()) == 5
    assert whole.usage is not None and whole.usage.completion_tokens == 5 and whole.id.startswith("chatcmpl-")
    stream = await create(
        client,
        model=MODEL,
        messages=[{"role": "user", "content": "hi"}],
        max_completion_tokens=6,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [c async for c in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len(text.split()) == 6 and chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 6


async def test_the_agent_model_runs_tools_and_continues_its_session(edges: dict[str, Edge]) -> None:
    client = sdk(edges["default"])
    raw = await create_raw(
        client,
        model="agentmesh-agent",
        messages=[{"role": "user", "content": "What is 6*7?"}],
        tool_choice=CALCULATOR,
        max_tokens=4,
    )
    session = raw.headers["x-agentmesh-session"]
    first = raw.parse()
    extra = (first.model_extra or {})["agentmesh"]
    assert extra["session_id"] == session and first.choices[0].message.content
    assert [(t["phase"], t["name"]) for t in extra["tool_calls"]] == [
        ("started", "calculator"),
        ("finished", "calculator"),
    ]
    stream = await create(
        client,
        model="agentmesh-agent",
        messages=[{"role": "user", "content": "And 7*8?"}],
        tool_choice=CALCULATOR,
        stream=True,
        extra_headers={"X-AgentMesh-Session": session},
    )
    kinds = []
    async for chunk in stream:
        tool = (chunk.model_extra or {}).get("agentmesh", {}).get("tool_call")
        kinds.append(f"tool:{tool['phase']}" if tool else "content" if chunk.choices else "other")
    assert kinds.index("tool:started") < kinds.index("tool:finished") < len(kinds) - 1 and kinds[-1] == "content"
    async with AgentClient.connect(edges["default"].grpc, api_key=KEY) as grpc_client:
        turns = (await grpc_client.get_session(session)).turns
    assert [t.user_message for t in turns] == ["What is 6*7?", "And 7*8?"]


async def test_errors_have_openai_shape_and_status(edges: dict[str, Edge]) -> None:
    with pytest.raises(openai.AuthenticationError) as denied:
        await sdk(edges["default"], key="wrong-key-123").models.list()
    assert denied.value.status_code == 401 and denied.value.code == "unauthenticated"
    async with httpx.AsyncClient() as http:  # no key at all
        reply = await http.post(f"{edges['default'].url}/chat/completions", json={"model": MODEL, "messages": []})
    assert reply.status_code == 401 and "missing credentials" in reply.json()["error"]["message"]
    client = sdk(edges["default"])
    for body, param in (
        ({"temperature": 5}, "temperature"),
        (
            {
                "tools": [
                    {
                        "type": "function",
                        "function": {
                            "name": "f",
                            "parameters": {"type": "object", "properties": {"a": {"type": "nope"}}},
                        },
                    }
                ]
            },
            "tools[0].function.parameters",
        ),
        (
            {"messages": [{"role": "user", "content": "a"}, {"role": "tool", "tool_call_id": "c1", "content": "b"}]},
            "messages[1].tool_call_id",
        ),
    ):
        with pytest.raises(openai.BadRequestError) as bad:
            await create(client, **{"model": MODEL, "messages": [{"role": "user", "content": "x"}], **body})
        assert bad.value.param == param, bad.value.body
    with pytest.raises(openai.NotFoundError) as unknown:
        await create(client, model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    assert unknown.value.code == "model_not_found" and unknown.value.param is None
    with pytest.raises(openai.BadRequestError) as bad:  # validated by the mesh itself, the field renamed
        await create(client, model="agentmesh-agent", messages=[{"role": "user", "content": " "}])
    assert bad.value.param == "messages[0].content"


async def test_429_carries_retry_after_and_the_sdk_honours_it(edges: dict[str, Edge]) -> None:
    never, patient = sdk(edges["limited"]), sdk(edges["limited"], retries=3)
    args: dict[str, Any] = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    await create(never, **args)
    with pytest.raises(openai.RateLimitError) as limited:
        await create(never, **args)
    headers = limited.value.response.headers
    assert headers["retry-after"] == "1" and 0 < int(headers["retry-after-ms"]) <= 250
    assert limited.value.code == "rate_limited"
    with pytest.raises(openai.RateLimitError):  # the agent model is limited by the same budget
        await create(never, **{**args, "model": "agentmesh-agent"})
    loop = asyncio.get_running_loop()
    began = loop.time()
    answer = await create(patient, **args)  # waits the pushback (retry-after-ms), then passes
    assert answer.choices[0].finish_reason == "length" and loop.time() - began >= 0.1


async def test_curl_streams_sse_and_a_client_that_leaves_cancels_the_turn(mesh: Mesh, edges: dict[str, Edge]) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "stream": True}
    curl = await asyncio.create_subprocess_exec(
        "curl",
        "-sSN",
        "--max-time",
        "30",
        f"{edges['default'].url}/chat/completions",
        "-H",
        f"Authorization: Bearer {KEY}",
        "-H",
        "Content-Type: application/json",
        "-d",
        json.dumps(body),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await curl.communicate()
    assert curl.returncode == 0, (curl.returncode, err.decode())
    events = [line.removeprefix("data: ") for line in out.decode().split("\n\n") if line]
    assert events, out
    assert events[-1] == "[DONE]" and json.loads(events[-2])["choices"][0]["finish_reason"] == "length"
    async with httpx.AsyncClient(timeout=30) as http:
        long = {**body, "model": "agentmesh-agent", "tool_choice": "none", "max_tokens": 200}
        async with http.stream(
            "POST", f"{edges['default'].url}/chat/completions", json=long, headers={"Authorization": f"Bearer {KEY}"}
        ) as reply:
            async for line in reply.aiter_lines():
                if '"content":"' in line and '"content":""' not in line:
                    break  # the answer has begun: hang up
    await eventually(lambda: mesh.unfinished() == 0, 10, "the engine request aborted")


ORDER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_order_status",
        "description": "The shipping status of an order, by its id.",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
            "additionalProperties": False,
        },
        "strict": True,
    },
}
ASK = [{"role": "user", "content": "Where is my order A1?"}]


async def test_client_tools_are_called_whole_and_streamed_alike_then_answered(edges: dict[str, Edge]) -> None:
    """On both models (one mesh: setting one up costs more than the requests). The simulator fills arguments
    with the schema's smallest instance; what is checked is the OpenAI shape."""
    client = sdk(edges["default"])
    for model in (MODEL, "agentmesh-agent"):
        body: dict[str, Any] = {"model": model, "messages": ASK, "tools": [ORDER_TOOL], "tool_choice": "required"}
        whole = (await create(client, **body)).choices[0]
        assert whole.finish_reason == "tool_calls" and whole.message.content is None
        calls = whole.message.tool_calls
        assert [c.function.name for c in calls] == ["get_order_status"] and calls[0].type == "function"
        assert json.loads(calls[0].function.arguments).keys() == {"order_id"}
        async with client.chat.completions.stream(**body) as stream:
            chunks = [event.chunk async for event in stream if event.type == "chunk"]
            streamed = (await stream.get_final_completion()).choices[0]
        assert streamed.finish_reason == "tool_calls"
        streamed_calls = streamed.message.tool_calls or []
        assert [(c.type, c.function.name, c.function.arguments) for c in streamed_calls] == [
            (c.type, c.function.name, c.function.arguments) for c in calls
        ]
        deltas = [c.choices[0].delta for c in chunks if c.choices]
        first = deltas[0].tool_calls[0] if deltas[0].tool_calls else None
        assert deltas[0].role == "assistant" and first is not None and first.function is not None
        assert first.index == 0 and first.id == streamed_calls[0].id and first.function.arguments == ""
        assert not any((c.model_extra or {}).get("agentmesh") for c in chunks)  # no mesh tool ran
        answered = [
            *ASK,
            {"role": "assistant", "content": None, "tool_calls": [c.model_dump() for c in calls]},
            {"role": "tool", "tool_call_id": calls[0].id, "content": '{"status": "shipped"}'},
        ]
        final = (await create(client, **{**body, "messages": answered, "tool_choice": "auto", "max_tokens": 8})).choices
        assert final[0].finish_reason in ("stop", "length") and final[0].message.content
        assert not final[0].message.tool_calls
    clash = {**ORDER_TOOL, "function": {**ORDER_TOOL["function"], "name": "calculator"}}
    with pytest.raises(openai.BadRequestError) as bad:  # refused by the router: the edge names the field
        await create(client, model="agentmesh-agent", messages=ASK, tools=[ORDER_TOOL, clash])
    assert bad.value.param == "tools[1].function.name", bad.value.body
