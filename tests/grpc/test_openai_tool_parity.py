"""Streamed and whole chat completions agree on client tool calls, on every prompt of the generality catalog.

The catalog's 62 description-only tools go out as a request's ``tools`` (as an agent framework declares
them) to the agent model of a real edge, gateway and router on a simulator replica; every first message of
the generality dev and held-out sets is sent twice, whole and streamed, and the calls the openai SDK
reassembles from the stream must equal the whole response's: same names, same arguments, same order, and
arguments that parse as JSON objects. (The simulator fills arguments with placeholder values; which tool a
message needs is the eval's to measure, not this test's.) The first request plans over a tool set the
router has not seen (62 cards embedded, the card classifier fitted): seconds on a loaded 2-core box, so the
timeouts are generous.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import openai
import pytest
import redis.asyncio as aioredis

from evals.cases import load_cases
from evals.catalog import GENERALITY_DIR, load_catalog
from gateway.http_edge import HttpEdge
from meshkit.mesh import FAST_SIM, start_mesh

KEY = "acme-secret-key"


@pytest.fixture
async def edge_url(redis_client: aioredis.Redis) -> AsyncIterator[str]:
    mesh = await start_mesh(redis_client, replicas=1, sim=replace(FAST_SIM, output_tokens=8))
    await mesh.add_router(response_cache_ttl_s=0)
    # 384 requests back to back: limits far above the test's pace (the limits are tested elsewhere).
    _, _, server = await mesh.add_gateway(
        rate_limit_backend="memory", rate_rps=1e4, rate_burst=1e4, rate_tokens_per_min=1e9, rate_token_burst=1e9
    )
    edge = HttpEdge(server.address, timeout_s=180, completion_model="SmolLM2-135M-Instruct")
    await edge.start("127.0.0.1", 0, grace_s=0)
    yield f"http://127.0.0.1:{edge.port}/v1"
    await edge.close()
    await mesh.close()


def calls_of(message: Any) -> list[tuple[str, str]]:
    return [(c.function.name, c.function.arguments) for c in message.tool_calls or []]


async def test_streamed_calls_equal_whole_calls_on_every_catalog_prompt(edge_url: str) -> None:
    catalog = load_catalog()
    tools = [
        {"type": "function", "function": {"name": n, "description": t["description"], "parameters": t["parameters"]}}
        for n, t in catalog.items()
    ]
    prompts = [c.turns[0].message for c in load_cases(("dev", "heldout"), GENERALITY_DIR, catalog)]
    client = openai.AsyncOpenAI(base_url=edge_url, api_key=KEY, max_retries=0, timeout=180)
    with_calls = 0
    for prompt in prompts:
        body: dict[str, Any] = {
            "model": "agentmesh-agent",
            "messages": [{"role": "user", "content": prompt}],
            "tools": tools,
            "max_tokens": 8,
        }
        whole = (await client.chat.completions.create(**body)).choices[0]
        async with client.chat.completions.stream(**body) as stream:
            streamed = (await stream.get_final_completion()).choices[0]
        assert calls_of(streamed.message) == calls_of(whole.message), prompt
        assert streamed.finish_reason == whole.finish_reason, prompt
        for _, arguments in calls_of(whole.message):
            assert isinstance(json.loads(arguments), dict), (prompt, arguments)
        if whole.message.tool_calls:
            assert whole.finish_reason == "tool_calls", prompt
            assert {c.function.name for c in whole.message.tool_calls} <= set(catalog), prompt  # only offered tools
            with_calls += 1
    assert len(prompts) >= 150 and with_calls >= 10, (len(prompts), with_calls)
