"""The typed client (agentmesh_client) against a real gateway in front of an in-process simulator mesh."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import replace

import pytest
import redis.asyncio as aioredis

from agentmesh_client import (
    AgentClient,
    CompletionFinished,
    CompletionStarted,
    RetryPolicy,
    Sampling,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnCompleted,
    TurnStarted,
)
from meshkit.mesh import FAST_SIM, Mesh, start_mesh
from services.cli import chat
from services.cli.interrupts import Interrupts
from services.runtime.errors import DeadlineExceeded, InvalidArgument, NotFound, ResourceExhausted, Unauthenticated

MakeClient = Callable[..., AgentClient]


@pytest.fixture
async def mesh(redis_client: aioredis.Redis) -> AsyncIterator[Mesh]:
    # 200 tokens at 20 ms: a turn that is still answering when the test cancels it.
    m = await start_mesh(redis_client, replicas=1, sim=replace(FAST_SIM, output_tokens=200, decode_base_s=0.02))
    await m.add_router(response_cache_ttl_s=0)
    yield m
    await m.close()


@pytest.fixture
async def gateways(mesh: Mesh) -> dict[str, str]:
    """Addresses of two gateways: ``default``, and ``limited`` (one request, then 4 per second)."""
    _, _, default = await mesh.add_gateway()
    _, _, limited = await mesh.add_gateway(rate_limit_backend="memory", rate_rps=4.0, rate_burst=1.0)
    return {"default": default.address, "limited": limited.address}


@pytest.fixture
async def make_client(gateways: dict[str, str]) -> AsyncIterator[MakeClient]:
    clients: list[AgentClient] = []

    def make(key: str = "acme-secret-key", retry: RetryPolicy | None = None, gateway: str = "default") -> AgentClient:
        client = AgentClient.connect(gateways[gateway], api_key=key, retry=retry)
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


class Screen(io.StringIO):
    """Terminal output that says when something was written."""

    def __init__(self) -> None:
        super().__init__()
        self.written = asyncio.Event()

    def write(self, text: str) -> int:
        self.written.set()
        return super().write(text)


async def test_complete_streams_typed_events(make_client: MakeClient) -> None:
    events = [e async for e in make_client().complete("hello", sampling=Sampling(max_tokens=5), timeout_s=10)]
    assert isinstance(events[0], CompletionStarted) and isinstance(events[-1], CompletionFinished)
    assert all(isinstance(e, TextDelta) for e in events[1:-1]) and len(events) > 2
    assert events[-1].usage.completion_tokens == 5 and events[-1].finish_reason == "length"


async def test_a_conversation_calls_a_tool_and_continues_its_session(make_client: MakeClient) -> None:
    client = make_client()
    async with client.conversation(timeout_s=30) as chat:
        first = await client.turn(chat, "What is 6*7?", tools="calculator", sampling=Sampling(max_tokens=4)).collect()
        kinds = [type(e) for e in first.events]
        assert kinds[0] is TurnStarted and kinds[-1] is TurnCompleted
        assert ToolCallStarted in kinds and ToolCallFinished in kinds
        started = next(e for e in first.events if isinstance(e, ToolCallStarted))
        assert started.tool_name == "calculator" and isinstance(started.arguments, dict)
        assert first.completed.error is None and first.text
        second = await client.turn(chat, "And again?", tools="none", sampling=Sampling(max_tokens=4)).collect()
        assert second.session_id == first.session_id == chat.session_id
    session = await client.get_session(first.session_id)
    assert [t.user_message for t in session.turns] == ["What is 6*7?", "And again?"]
    paged = await client.get_session(first.session_id, page_size=1)  # two pages, followed to the end
    assert [t.user_message for t in paged.turns] == ["What is 6*7?", "And again?"] and paged.turn_count == 2
    with pytest.raises(NotFound):
        await make_client("other-secret-key").get_session(first.session_id)


async def test_cancel_ends_the_turn_aborted_and_the_stream_carries_the_next(make_client: MakeClient) -> None:
    client = make_client()
    async with client.conversation(timeout_s=30) as chat:
        turn = client.turn(chat, "tell me a long story", tools="none")
        events = []
        async for event in turn:
            events.append(event)
            if isinstance(event, TextDelta):
                await turn.cancel()
        done = events[-1]
        assert isinstance(done, TurnCompleted) and done.finish_reason == "aborted" and done.error is None
        assert sum(isinstance(e, TextDelta) for e in events) == 1  # later text of the cancelled turn is dropped
        # Leaving a turn early (break) cancels and drains it before the next turn starts.
        async for event in client.turn(chat, "another long one", tools="none"):
            if isinstance(event, TextDelta):
                break
        after = await client.turn(chat, "short", tools="none", sampling=Sampling(max_tokens=3)).collect()
        assert after.completed.finish_reason == "length"


async def test_a_turn_timeout_aborts_only_that_turn(make_client: MakeClient) -> None:
    client = make_client()
    async with client.conversation() as chat:
        timed = [e async for e in client.turn(chat, "long", tools="none", timeout_s=0.3)][-1]
        assert isinstance(timed, TurnCompleted) and timed.finish_reason == "aborted"
        assert isinstance(timed.error, DeadlineExceeded)
        fine = await client.turn(chat, "short", tools="none", sampling=Sampling(max_tokens=2)).collect()
        assert fine.completed.finish_reason == "length"


async def test_rejections_raise_the_taxonomy_and_retries_honour_the_pushback(make_client: MakeClient) -> None:
    with pytest.raises(Unauthenticated):
        [e async for e in make_client("wrong-key-123").complete("hi")]
    with pytest.raises(InvalidArgument) as bad:
        async with make_client().conversation() as chat:
            await chat.turn(" ").collect()
    assert [v.field for v in bad.value.field_violations] == ["start_turn.message"]

    never = make_client(retry=RetryPolicy.never(), gateway="limited")
    patient = make_client(retry=RetryPolicy(attempts=5, max_wait_s=2.0), gateway="limited")
    short = Sampling(max_tokens=2)
    [e async for e in never.complete("hi", sampling=short)]  # takes the one token of the bucket
    with pytest.raises(ResourceExhausted) as limited:
        [e async for e in never.complete("hi", sampling=short)]
    assert limited.value.reason == "RATE_LIMITED" and 0 < (limited.value.retry_after_s or 0) <= 0.25
    loop = asyncio.get_running_loop()
    began = loop.time()
    events = [e async for e in patient.complete("hi", sampling=short)]  # waits out the pushback, then succeeds
    assert isinstance(events[-1], CompletionFinished) and loop.time() - began >= 0.1
    async with patient.conversation() as chat:  # a rejected turn is sent again after the pushback
        turn = await patient.turn(chat, "hi", tools="none", sampling=short).collect()
        assert turn.completed.error is None
    async with never.conversation() as chat:  # ... unless the policy says never: the error is the turn's
        rejected = [e async for e in never.turn(chat, "hi", tools="none", sampling=short)]
    assert len(rejected) == 1 and isinstance(rejected[0], TurnCompleted)
    assert isinstance(rejected[0].error, ResourceExhausted) and json.dumps(rejected[0].finish_reason)


async def test_the_cli_chats_and_completes_through_the_client(gateways: dict[str, str]) -> None:
    common = {"target": gateways["default"], "api_key": "acme-secret-key", "priority": "P1"}
    out = io.StringIO()
    await chat.chat(
        argparse.Namespace(**common, once="What is 6*7?", session="", new_session="", tool_choice="calculator"), out
    )
    text = out.getvalue()
    assert "  → calculator {" in text and "  ← calculator " in text and "generations (named)" in text
    out = io.StringIO()
    await chat.complete(argparse.Namespace(**common, prompt="hello", max_tokens=3), out)
    assert len(out.getvalue().split()) == 3
    bad = argparse.Namespace(**{**common, "api_key": "wrong-key-123"}, prompt="hi", max_tokens=0)
    with pytest.raises(chat.CliError, match=r"^UNAUTHENTICATED: invalid API key"):
        await chat.complete(bad, io.StringIO())


async def test_ctrl_c_in_a_cli_turn_cancels_only_that_turn(make_client: MakeClient) -> None:
    client = make_client()
    interrupts = Interrupts()
    out = Screen()
    async with client.conversation() as conversation:
        turn = client.turn(conversation, "a long story", tools="none")
        running = asyncio.create_task(chat.run_turn(turn, out, interrupts))
        await asyncio.wait_for(out.written.wait(), 10)  # the answer has begun
        interrupts.on_sigint()
        session = await asyncio.wait_for(running, 10)
        assert out.getvalue().endswith("[cancelled]\n") and session == conversation.session_id
        out = Screen()
        await chat.run_turn(client.turn(conversation, "short", tools="none", sampling=Sampling(max_tokens=2)), out)
        assert "completion tokens" in out.getvalue()
