"""A small test client for InferenceService.Generate: submit, abort, collect frames per request."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc.aio

from agentmesh.common.v1 import common_pb2
from agentmesh.inference.v1 import inference_pb2, inference_pb2_grpc


def submit(
    request_id: str,
    text: str | None = None,
    *,
    chat: Sequence[tuple[common_pb2.Role.ValueType, str]] = (),
    max_tokens: int | None = 16,
    temperature: float = 0.0,
    priority: common_pb2.Priority.ValueType = common_pb2.PRIORITY_P1,
    json_schema: dict[str, Any] | str | None = None,
    timeout_s: float | None = None,
) -> inference_pb2.GenerateRequest:
    s = inference_pb2.SubmitGeneration(request_id=request_id, priority=priority)
    if text is not None:
        s.text = text
    if chat:
        s.chat.add_generation_prompt = True
        for role, content in chat:
            s.chat.messages.add(role=role, content=content)
    if max_tokens is not None:
        s.sampling.max_tokens = max_tokens
    s.sampling.temperature = temperature
    if json_schema is not None:
        s.structured_output.json_schema = json_schema if isinstance(json_schema, str) else json.dumps(json_schema)
    if timeout_s is not None:
        s.timeout.FromNanoseconds(int(timeout_s * 1e9))
    return inference_pb2.GenerateRequest(submit=s)


def scoring(
    request_id: str, continuation: str, chat: Sequence[tuple[common_pb2.Role.ValueType, str]]
) -> inference_pb2.GenerateRequest:
    """A request that scores ``continuation`` as the answer to ``chat`` (no sampling: nothing is generated)."""
    message = submit(request_id, chat=chat, max_tokens=None)
    message.submit.ClearField("sampling")
    message.submit.scoring.continuation = continuation
    return message


def abort(request_id: str) -> inference_pb2.GenerateRequest:
    return inference_pb2.GenerateRequest(abort=inference_pb2.AbortGeneration(request_id=request_id))


@dataclass
class Collected:
    """Everything received on one Generate stream."""

    frames: list[inference_pb2.GenerateResponse] = field(default_factory=list)
    deltas: dict[str, list[inference_pb2.GenerationDelta]] = field(default_factory=lambda: defaultdict(list))
    done: dict[str, asyncio.Event] = field(default_factory=lambda: defaultdict(asyncio.Event))
    first: dict[str, asyncio.Event] = field(default_factory=lambda: defaultdict(asyncio.Event))

    def text(self, request_id: str) -> str:
        return "".join(d.text for d in self.deltas[request_id])

    def result(self, request_id: str) -> inference_pb2.GenerationResult:
        final = self.deltas[request_id][-1]
        assert final.HasField("result"), f"{request_id} has no final delta"
        return final.result

    def loads(self) -> list[inference_pb2.LoadReport]:
        return [f.load for f in self.frames if f.HasField("load")]


class GenerateStream:
    """An open Generate call with a reader task filling ``Collected``."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.call = inference_pb2_grpc.InferenceServiceStub(channel).Generate()
        self.got = Collected()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for frame in self.call:
            self.got.frames.append(frame)
            for delta in frame.deltas:
                assert not self.got.done[delta.request_id].is_set(), f"delta after the end of {delta.request_id}"
                self.got.deltas[delta.request_id].append(delta)
                if delta.token_count:
                    self.got.first[delta.request_id].set()
                if delta.HasField("result"):
                    self.got.done[delta.request_id].set()

    async def send(self, *messages: inference_pb2.GenerateRequest) -> None:
        for message in messages:
            await self.call.write(message)

    async def wait(self, *request_ids: str, within_s: float = 60) -> None:
        await asyncio.wait_for(asyncio.gather(*(self.got.done[r].wait() for r in request_ids)), within_s)

    async def close(self) -> None:
        await self.call.done_writing()
        await asyncio.wait_for(self._reader, 60)

    def cancel(self) -> None:
        self.call.cancel()
        self._reader.cancel()
