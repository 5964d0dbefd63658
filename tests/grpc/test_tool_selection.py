"""Embedding tool selection in a real router: tools bring their own examples; two asks run two tools at once.

Simulator replicas (they fill arguments with the smallest instance of the
schema), a real tool executor with tools registered here, real Redis and the
real all-MiniLM-L6-v2 embedder.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from meshkit.mesh import Mesh, start_mesh
from meshkit.turns import converse
from services.router.planning.embedding import MiniLmEmbedder
from services.tools.registry import ToolDefinition, ToolExample

NONE = agent_pb2.ToolChoice(mode=agent_pb2.TOOL_CHOICE_MODE_NONE)


class Rendezvous:
    """Both tools wait here for each other: the turn completes only if they run at the same time."""

    def __init__(self) -> None:
        self.barrier = asyncio.Barrier(2)
        self.started: list[str] = []

    async def meet(self, name: str) -> None:
        self.started.append(name)
        await asyncio.wait_for(self.barrier.wait(), 5)


def weather_tool(rendezvous: Rendezvous) -> ToolDefinition:
    async def weather(args: dict[str, Any]) -> dict[str, Any]:
        await rendezvous.meet("weather")
        return {"city": args["city"], "forecast": "sunny", "celsius": 21}

    return ToolDefinition(
        name="weather",
        description="Weather forecast for a city: temperature, rain, wind.",
        parameters={
            "type": "object",
            "properties": {"city": {"type": "string", "minLength": 1}},
            "required": ["city"],
            "additionalProperties": False,
        },
        fn=weather,
        examples=(
            ToolExample("What's the weather in Paris?", {"city": "Paris"}),
            ToolExample("Will it rain in London tomorrow?", {"city": "London"}),
            ToolExample("Is it sunny in Madrid right now?", {"city": "Madrid"}),
            ToolExample("weather forecast for Berlin", {"city": "Berlin"}),
            ToolExample("How hot is it in Cairo today?", {"city": "Cairo"}),
            ToolExample("Do I need an umbrella in Seattle?", {"city": "Seattle"}),
            ToolExample("What is the weather like in Oslo?", {"city": "Oslo"}),
        ),
        negative_examples=("What is climate change?", "Write a poem about the rain.", "Why is the sky blue?"),
        summarize=lambda out: f"In {out['city']} it is {out['forecast']}, {out['celsius']} °C.",
        timeout_s=8.0,
        max_attempts=1,
    )


def stock_tool(rendezvous: Rendezvous) -> ToolDefinition:
    async def stock_quote(args: dict[str, Any]) -> dict[str, Any]:
        await rendezvous.meet("stock_quote")
        return {"symbol": args["symbol"], "price": 101.5}

    return ToolDefinition(
        name="stock_quote",
        description="The latest trading price of a company's stock.",
        parameters={
            "type": "object",
            "properties": {"symbol": {"type": "string", "minLength": 1}},
            "required": ["symbol"],
            "additionalProperties": False,
        },
        fn=stock_quote,
        examples=(
            ToolExample("What is the stock price of Apple?", {"symbol": "AAPL"}),
            ToolExample("How is ACME stock trading today?", {"symbol": "ACME"}),
            ToolExample("Give me a quote for MSFT shares", {"symbol": "MSFT"}),
            ToolExample("What's Tesla's share price?", {"symbol": "TSLA"}),
            ToolExample("stock quote for IBM", {"symbol": "IBM"}),
        ),
        negative_examples=("What is a stock market?", "Explain how shares work."),
        summarize=lambda out: f"{out['symbol']} trades at {out['price']}.",
        timeout_s=8.0,
        max_attempts=1,
    )


@pytest.fixture(scope="module")
def embedder() -> MiniLmEmbedder:
    return MiniLmEmbedder()


@pytest.fixture
async def rendezvous() -> Rendezvous:
    return Rendezvous()


@pytest.fixture
async def mesh(redis_client: aioredis.Redis, rendezvous: Rendezvous) -> AsyncIterator[Mesh]:
    m = await start_mesh(redis_client, replicas=1, extra_tools=[weather_tool(rendezvous), stock_tool(rendezvous)])
    yield m
    await m.close()


def started(result: Any) -> list[agent_pb2.ToolCallStarted]:
    return [e.tool_call_started for e in result.events if e.HasField("tool_call_started")]


def finished(result: Any) -> list[agent_pb2.ToolCallFinished]:
    return [e.tool_call_finished for e in result.events if e.HasField("tool_call_finished")]


async def test_a_tool_registered_with_its_own_examples_is_selected_with_no_router_change(
    mesh: Mesh, embedder: MiniLmEmbedder, rendezvous: Rendezvous
) -> None:
    stub = await mesh.add_router(tool_selection="embedding", embedder=embedder, answer_opening=True)
    rendezvous.barrier = asyncio.Barrier(1)  # one tool: nobody to wait for
    result = await converse(stub, agent_pb2.StartTurn(message="Is it going to rain in Oslo this afternoon?"))
    assert [c.tool_name for c in started(result)] == ["weather"]
    assert finished(result)[0].status == common_pb2.TOOL_CALL_STATUS_OK
    done = result.completed
    assert done.tool_selection == agent_pb2.TOOL_SELECTION_EMBEDDING
    assert done.generations == 2  # fill + answer: no generation chose the tool
    # The answer opens with the tool's own summary of its result.
    assert result.text.startswith("In x it is sunny, 21 °C.")


async def test_a_message_with_two_asks_runs_both_tools_concurrently(
    mesh: Mesh, embedder: MiniLmEmbedder, rendezvous: Rendezvous
) -> None:
    stub = await mesh.add_router(tool_selection="embedding", embedder=embedder)
    message = "What's the weather in Oslo today, and how is ACME stock trading?"
    result = await converse(stub, agent_pb2.StartTurn(message=message))
    assert sorted(c.tool_name for c in started(result)) == ["stock_quote", "weather"]
    assert {c.round for c in started(result)} == {1}
    # Each tool waited at the barrier for the other: both OK means they ran at the same time.
    assert [f.status for f in finished(result)] == [common_pb2.TOOL_CALL_STATUS_OK] * 2
    assert sorted(rendezvous.started) == ["stock_quote", "weather"]
    assert result.completed.generations == 3  # two fills (concurrent) + answer
    assert result.completed.tool_rounds == 1


async def test_plain_chat_runs_no_tool_and_one_generation(mesh: Mesh, embedder: MiniLmEmbedder) -> None:
    stub = await mesh.add_router(tool_selection="embedding", embedder=embedder)
    result = await converse(stub, agent_pb2.StartTurn(message="Write a short poem about autumn leaves."))
    assert started(result) == []
    assert result.completed.generations == 1
    assert result.completed.tool_selection == agent_pb2.TOOL_SELECTION_EMBEDDING
    skipped = await converse(stub, agent_pb2.StartTurn(message="What's the weather in Oslo?", tool_choice=NONE))
    assert started(skipped) == [] and skipped.completed.tool_selection == agent_pb2.TOOL_SELECTION_SKIPPED


async def test_llm_selection_asks_the_model_first(mesh: Mesh) -> None:
    stub = await mesh.add_router(tool_selection="llm")
    result = await converse(stub, agent_pb2.StartTurn(message="What's the weather in Oslo?"))
    # The simulator chooses the smallest instance of the choose schema: no tool; then it answers.
    assert started(result) == []
    assert result.completed.tool_selection == agent_pb2.TOOL_SELECTION_LLM
    assert result.completed.generations == 2
