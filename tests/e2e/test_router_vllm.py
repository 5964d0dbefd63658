"""The agent loop on the real vLLM engine (embedded SmolLM2), a real tool executor and real Redis."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import grpc.aio
import pytest
import redis.asyncio as aioredis

from agentmesh.agent.v1 import agent_pb2, agent_pb2_grpc
from agentmesh.common.v1 import common_pb2
from meshkit.turns import TurnResult, converse
from services.router.build import build_router
from services.router.config import RouterConfig
from services.runtime.cache import TwoLevelCache
from services.runtime.config import ServiceConfig
from services.runtime.metrics import Metrics
from services.runtime.server import MeshServer
from services.runtime.tenancy import TenantInterceptor, stamp_tenant
from services.tools.builtin import default_tools
from services.tools.executor import ToolExecutor
from services.tools.registry import ToolRegistry
from services.tools.servicer import ToolExecutorServicer
from tests.e2e.conftest import VllmReplica

pytestmark = pytest.mark.vllm


@pytest.fixture
async def agent(
    vllm_replica: VllmReplica, redis_client: aioredis.Redis
) -> AsyncIterator[agent_pb2_grpc.AgentServiceStub]:
    executor = ToolExecutor(ToolRegistry(default_tools()), cache=TwoLevelCache("test:tools:", redis_client))
    tools_server = MeshServer(ServiceConfig(port=0), [ToolExecutorServicer(executor).service()], metrics=Metrics())
    await tools_server.start()
    config = replace(RouterConfig(), port=0, inference=(vllm_replica.server.address,), tools=tools_server.address)
    router = build_router(config, redis_client, Metrics())
    server = MeshServer(config, [router.servicer.service()], metrics=Metrics(), interceptors=[TenantInterceptor()])
    await server.start()
    await router.start()
    assert await router.replicas.wait_any(30)
    async with grpc.aio.insecure_channel(server.address, interceptors=stamp_tenant("e2e")) as channel:
        yield agent_pb2_grpc.AgentServiceStub(channel)
    await server.drain(grace=0)
    await router.close()
    await tools_server.drain(grace=0)


def tool_calls(result: TurnResult) -> list[agent_pb2.ToolCallFinished]:
    return [e.tool_call_finished for e in result.events if e.HasField("tool_call_finished")]


async def test_arithmetic_calls_the_calculator_and_answers_1081(
    agent: Any,
) -> None:
    result = await converse(agent, agent_pb2.StartTurn(message="What is 23*47?"))
    calls = tool_calls(result)
    assert [c.tool_name for c in calls] == ["calculator"]
    assert calls[0].status == common_pb2.TOOL_CALL_STATUS_OK
    assert json.loads(calls[0].output_json)["result"] == 1081
    assert "1081" in result.text.replace(",", "")


async def test_time_question_calls_the_clock(agent: Any) -> None:
    result = await converse(agent, agent_pb2.StartTurn(message="What time is it in Tokyo?"))
    assert "clock" in [c.tool_name for c in tool_calls(result)]
    assert result.text


async def test_haiku_calls_no_tool(agent: Any) -> None:
    result = await converse(agent, agent_pb2.StartTurn(message="Write a haiku about the sea"))
    assert tool_calls(result) == []
    assert len(result.text.split()) >= 5


async def test_follow_up_turn_sees_the_previous_turn(agent: Any) -> None:
    none = agent_pb2.ToolChoice(mode=agent_pb2.TOOL_CHOICE_MODE_NONE)
    first = await converse(agent, agent_pb2.StartTurn(message="Remember this code word: PINEAPPLE.", tool_choice=none))
    second = await converse(
        agent,
        agent_pb2.StartTurn(session_id=first.accepted.session_id, message="What is the code word?", tool_choice=none),
    )
    # The code word exists only in the first turn: the model can only know it from the history.
    assert "PINEAPPLE" in second.text
    assert second.completed.usage.prompt_tokens > first.completed.usage.prompt_tokens


@pytest.mark.parametrize(
    ("message", "result", "generations"),
    [
        ("What is half of 10?", 5, 1),  # the expression is copied from the message: the answer is the one generation
        ("What is 15% of 80?", 12, 1),
        ("How many minutes are in 3 hours?", 180, 1),  # a count of time units the tool reads: copied too
        ("If each box holds 12 eggs, how many eggs are in 7 boxes?", 84, 2),  # composed (12*7): fill + answer
    ],
)
async def test_calls_with_derived_numbers_are_planned_and_run(
    agent: Any, message: str, result: float, generations: int
) -> None:
    """The old grounding check dropped the first three: 2 (half), 0.15 or 100 (15%), 60 (minutes) are not in the
    message; the last is composed by the model, a word problem with no arithmetic span to copy."""
    turn = await converse(agent, agent_pb2.StartTurn(message=message))
    calls = tool_calls(turn)
    assert [c.tool_name for c in calls] == ["calculator"]
    assert calls[0].status == common_pb2.TOOL_CALL_STATUS_OK
    assert json.loads(calls[0].output_json)["result"] == result
    assert str(result) in turn.text
    assert turn.completed.generations == generations
    assert turn.completed.tool_selection == agent_pb2.TOOL_SELECTION_EMBEDDING


async def test_two_asks_get_two_tools_in_one_round(agent: Any) -> None:
    turn = await converse(agent, agent_pb2.StartTurn(message="What is 23*47 and what time is it in Tokyo?"))
    calls = tool_calls(turn)
    assert sorted(c.tool_name for c in calls) == ["calculator", "clock"]
    assert all(c.status == common_pb2.TOOL_CALL_STATUS_OK for c in calls)
    assert turn.completed.tool_rounds == 1
    assert "1081" in turn.text and "Asia/Tokyo" in turn.text


async def test_a_follow_up_uses_the_previous_result(agent: Any) -> None:
    first = await converse(agent, agent_pb2.StartTurn(message="What is 12*12?"))
    assert "144" in first.text
    second = await converse(
        agent, agent_pb2.StartTurn(session_id=first.accepted.session_id, message="Now add 6 to that result.")
    )
    calls = tool_calls(second)
    assert [c.tool_name for c in calls] == ["calculator"]
    assert json.loads(calls[0].output_json)["result"] == 150
    assert "150" in second.text
