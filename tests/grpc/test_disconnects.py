"""Clients that go away — mid-turn or between turns — leave no ERROR and no traceback in any service's log.

Every service of the in-process mesh (simulator replica, tool executor,
router, gateway) logs into this process, so the records captured here are all
of their logs. Before the fix, a cancel that reached the router while it was
writing a turn's event left the turn's async generators suspended inside
their spans; the garbage collector closed them later in a task of its own
("opentelemetry.context: Failed to detach context ... was created in a
different Context", ERROR with a traceback), and a TurnCompleted whose send
outlived the cancelled turn failed with nobody to retrieve it ("Task exception
was never retrieved"). In this suite's mid-turn case that showed as 1-8
ERRORs per run of 80 streams; the cases run enough streams that a regression
is all but certain to show.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest
import redis.asyncio as aioredis

from agentmesh.agent.v1 import agent_pb2, agent_pb2_grpc
from agentmesh.common.v1 import common_pb2
from meshkit.mesh import FAST_SIM, Mesh, start_mesh
from services.cli import chat
from tests.support.turns import cancel, next_message, read_turn, start
from tests.support.waiting import eventually

if TYPE_CHECKING:
    Stub = agent_pb2_grpc.AgentServiceAsyncStub
    Metadata = tuple[tuple[str, str], ...]

ACME = (("authorization", "Bearer acme-secret-key"),)


@pytest.fixture
async def mesh(redis_client: aioredis.Redis) -> AsyncIterator[Mesh]:
    # 60 tokens at 1 ms: a turn streams long enough to be cut anywhere, short enough to run many.
    m = await start_mesh(redis_client, replicas=1, sim=replace(FAST_SIM, output_tokens=60, decode_base_s=0.001))
    yield m
    await m.close()


@pytest.fixture
async def stubs(mesh: Mesh) -> dict[str, tuple[Stub, Metadata]]:
    """The router itself and a gateway in front of it, each with the metadata its clients send."""
    router = await mesh.add_router(response_cache_ttl_s=0)
    # A budget of its own, far above what the cases send (they test disconnects, not rate limits).
    gateway, _, _ = await mesh.add_gateway(rate_limit_backend="memory", rate_rps=1000.0, rate_burst=1000.0)
    return {"router": (router, ()), "gateway": (gateway, ACME)}


class Captured(logging.Handler):
    """Every record at WARNING or above, from every logger (asyncio's and OpenTelemetry's included)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def errors(self) -> list[str]:
        return [
            f"{r.name}: {r.getMessage()[:200]}"
            for r in self.records
            if r.levelno >= logging.ERROR or r.exc_info is not None
        ]


@pytest.fixture
async def captured() -> AsyncIterator[Captured]:
    await _settle()  # what earlier tests on this loop left for the collector is theirs, not ours
    handler = Captured()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(min(level, logging.WARNING) if level else logging.WARNING)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


async def _settle() -> None:
    """Collect what the cases dropped and let the finalizer tasks that creates run (where the errors were)."""
    for _ in range(3):
        gc.collect()
        await asyncio.sleep(0.05)


async def _cut_mid_turn(stub: Stub, metadata: Metadata, after: int, message: str) -> None:
    """Start a turn, read ``after`` events, then cancel the whole call (the client went away)."""
    call = stub.Converse(metadata=metadata)
    await call.write(start(message, max_tokens=60))
    for _ in range(after):
        event = await next_message(call)
        if event.HasField("turn_completed"):
            break
    call.cancel()


async def test_cancelling_streams_mid_turn_logs_no_error(
    mesh: Mesh, stubs: dict[str, tuple[Stub, Metadata]], captured: Captured
) -> None:
    for name, (stub, metadata) in stubs.items():
        for i in range(40 if name == "router" else 20):
            await _cut_mid_turn(stub, metadata, 1 + i % 8, f"tell me a story {i}")
    await _settle()
    await eventually(lambda: mesh.unfinished() == 0, what="every cancelled generation aborted on its replica")
    assert captured.errors() == []


async def test_closing_streams_between_turns_and_after_cancel_logs_no_error(
    mesh: Mesh, stubs: dict[str, tuple[Stub, Metadata]], captured: Captured
) -> None:
    for stub, metadata in stubs.values():
        for i in range(10):
            # The CLI's way out: read the turn to its TurnCompleted, half-close, and cancel at once.
            call = stub.Converse(metadata=metadata)
            await call.write(start(f"hello {i}", max_tokens=8))
            await read_turn(call)
            await call.done_writing()
            call.cancel()
            # CancelTurn, its ABORTED TurnCompleted, then the same.
            call = stub.Converse(metadata=metadata)
            await call.write(start(f"a long story {i}", turn_id=f"t{i}", max_tokens=60))
            await next_message(call)
            await call.write(cancel(f"t{i}"))
            events = await read_turn(call)
            assert events[-1].turn_completed.finish_reason == common_pb2.FINISH_REASON_ABORTED
            await call.done_writing()
            call.cancel()
            # Half-closed mid-turn (the turn finishes), then gone before its end.
            call = stub.Converse(metadata=metadata)
            await call.write(start(f"one more story {i}", max_tokens=60))
            assert (await next_message(call)).HasField("turn_accepted")
            await call.done_writing()
            await next_message(call)
            call.cancel()
        # A tool call in flight when the client goes away.
        for after in (1, 2, 3):
            await _cut_mid_turn(stub, metadata, after, "What is 23*47?")
    await _settle()
    await eventually(lambda: mesh.unfinished() == 0, what="every generation finished or aborted")
    assert captured.errors() == []


async def test_complete_streams_cut_short_and_piped_cli_chats_log_no_error(
    mesh: Mesh, stubs: dict[str, tuple[Stub, Metadata]], captured: Captured
) -> None:
    for stub, metadata in stubs.values():
        for i in range(10):
            call = stub.Complete(
                agent_pb2.CompleteRequest(prompt=f"count to {i}", sampling=common_pb2.SamplingParams(max_tokens=60)),
                metadata=metadata,
            )
            async for message in call:
                if message.HasField("text_delta") and i % 3 == 0:
                    break
                if message.HasField("text_delta") and i % 3 == 1:
                    await asyncio.sleep(0)
                    break
            call.cancel()
    gateway = mesh.gateways[0][1].address
    for i in range(5):  # `echo MESSAGE | agentmesh chat --once`, as the piped sessions ran
        args = argparse.Namespace(
            target=gateway,
            api_key="acme-secret-key",
            priority="P1",
            once=f"hi {i}",
            session="",
            new_session="",
            tool_choice="auto",
        )
        await chat.chat(args, io.StringIO(), io.StringIO())
    await _settle()
    await eventually(lambda: mesh.unfinished() == 0, what="every generation finished or aborted")
    assert captured.errors() == []


async def test_the_captured_log_would_show_an_error(captured: Captured) -> None:
    """The capture is live: an ERROR from any logger lands in it (so the assertions above can fail)."""
    logging.getLogger("opentelemetry.context").error("Failed to detach context")
    assert captured.errors() == ["opentelemetry.context: Failed to detach context"]
