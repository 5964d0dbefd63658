"""What a benchmark drives: the gateway or a router (AgentService), an inference replica, vLLM's server.

Every target turns one ``BenchRequest`` into one ``RequestTrace``: when it was
sent, when each token-bearing message arrived and how many tokens it carried,
and the gRPC status name if it failed.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, Protocol

import grpc
import grpc.aio

from agentmesh.agent.v1 import agent_pb2, agent_pb2_grpc
from agentmesh.common.v1 import common_pb2
from agentmesh.inference.v1 import inference_pb2, inference_pb2_grpc
from loadtest.stats import RequestTrace
from loadtest.workloads import BenchRequest
from services.runtime.channel import create_channel

PRIORITY = {0: common_pb2.PRIORITY_P0, 1: common_pb2.PRIORITY_P1, 2: common_pb2.PRIORITY_P2}


class Target(Protocol):
    name: str

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def run(self, request: BenchRequest) -> RequestTrace: ...


class AgentTarget:
    """AgentService (gateway or router): Complete for single requests, Converse for sessions and tools."""

    def __init__(
        self, address: str, *, api_key: str = "", tenant: str = "", name: str = "agent", compression: bool = True
    ) -> None:
        """``api_key`` for a gateway; ``tenant`` for a router called directly (it serves only a named tenant)."""
        self.name = name
        self._address = address
        auth = (("authorization", f"Bearer {api_key}"),) if api_key else ()
        self._metadata = auth + ((("x-agentmesh-tenant", tenant),) if tenant else ())
        self._compression = grpc.Compression.Gzip if compression else grpc.Compression.NoCompression
        self._sessions: dict[int, str] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def start(self) -> None:
        self._channel = create_channel(self._address, compression=self._compression)
        self._stub = agent_pb2_grpc.AgentServiceStub(self._channel)

    async def close(self) -> None:
        await self._channel.close()

    async def run(self, request: BenchRequest) -> RequestTrace:
        if request.session is None and not request.tools:
            return await self._complete(request)
        lock = self._locks.setdefault(request.session if request.session is not None else -1, asyncio.Lock())
        if request.session is None:
            return await self._turn(request)
        async with lock:  # turns of one session run in order
            return await self._turn(request)

    async def _complete(self, request: BenchRequest) -> RequestTrace:
        message = agent_pb2.CompleteRequest(prompt=request.text, priority=PRIORITY[request.priority])
        message.sampling.max_tokens = request.max_tokens
        message.sampling.temperature = 0.7  # no response-cache hits: measure serving, not the cache
        trace = RequestTrace(sent=time.perf_counter(), priority=request.priority)
        try:
            async for event in self._stub.Complete(message, metadata=self._metadata):
                if event.HasField("text_delta") and event.text_delta.text:
                    trace.chunks.append((time.perf_counter(), 1))
                elif event.HasField("finished"):
                    self._fix_token_count(trace, event.finished.usage.completion_tokens)
        except grpc.aio.AioRpcError as exc:
            trace.error = exc.code().name
        trace.done = time.perf_counter()
        return trace

    async def _turn(self, request: BenchRequest) -> RequestTrace:
        start = agent_pb2.StartTurn(
            message=request.text, priority=PRIORITY[request.priority], system_prompt=request.system_prompt
        )
        start.sampling.max_tokens = request.max_tokens
        if request.session is not None:
            start.session_id = self._sessions.get(request.session, "")
        if not request.tools:
            start.tool_choice.mode = agent_pb2.TOOL_CHOICE_MODE_NONE
        trace = RequestTrace(sent=time.perf_counter(), priority=request.priority)
        call = self._stub.Converse(metadata=self._metadata)
        try:
            await call.write(agent_pb2.ConverseRequest(start_turn=start))
            while isinstance(event := await call.read(), agent_pb2.ConverseResponse):  # else EOF
                if event.HasField("turn_accepted") and request.session is not None:
                    self._sessions[request.session] = event.turn_accepted.session_id
                elif event.HasField("text_delta") and event.text_delta.text:
                    trace.chunks.append((time.perf_counter(), 1))
                elif event.HasField("turn_completed"):
                    self._fix_token_count(trace, event.turn_completed.usage.completion_tokens, answer_only=True)
                    break
            await call.done_writing()
        except grpc.aio.AioRpcError as exc:
            trace.error = exc.code().name
        trace.done = time.perf_counter()
        return trace

    @staticmethod
    def _fix_token_count(trace: RequestTrace, completion: int, answer_only: bool = False) -> None:
        """Text deltas are not tokens one-to-one; spread the reported count over the messages."""
        if not trace.chunks or answer_only:
            return  # a turn's usage includes planning; keep one token per delta there
        per, extra = divmod(completion, len(trace.chunks))
        trace.chunks = [(t, per + (1 if i < extra else 0)) for i, (t, _) in enumerate(trace.chunks)]


class InferenceTarget:
    """One inference replica over one multiplexed Generate stream (how the router talks to it)."""

    def __init__(self, address: str, *, name: str = "inference", compression: bool = True) -> None:
        self.name = name
        self._address = address
        self._compression = grpc.Compression.Gzip if compression else grpc.Compression.NoCompression
        self._traces: dict[str, RequestTrace] = {}
        self._done: dict[str, asyncio.Event] = {}
        self.frames = 0

    async def start(self) -> None:
        self._channel = grpc.aio.insecure_channel(self._address, compression=self._compression)
        self._call = inference_pb2_grpc.InferenceServiceStub(self._channel).Generate()
        self._writing = asyncio.Lock()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for frame in self._call:
            now = time.perf_counter()
            self.frames += 1
            for d in frame.deltas:
                trace = self._traces.get(d.request_id)
                if trace is None:
                    continue
                if d.token_count:
                    trace.chunks.append((now, d.token_count))
                if d.HasField("result"):
                    if d.result.HasField("error"):
                        trace.error = f"code {d.result.error.code}"
                    trace.done = now
                    self._done.pop(d.request_id).set()

    async def close(self) -> None:
        await self._call.done_writing()
        await asyncio.wait_for(self._reader, 30)
        await self._channel.close()

    async def run(self, request: BenchRequest) -> RequestTrace:
        rid = uuid.uuid4().hex
        submit = inference_pb2.SubmitGeneration(request_id=rid, priority=PRIORITY[request.priority])
        if request.system_prompt:
            submit.chat.messages.add(role=common_pb2.ROLE_SYSTEM, content=request.system_prompt)
        submit.chat.messages.add(role=common_pb2.ROLE_USER, content=request.text)
        submit.chat.add_generation_prompt = True
        submit.sampling.max_tokens = request.max_tokens
        submit.sampling.temperature = 0.7
        trace = self._traces[rid] = RequestTrace(sent=0.0, priority=request.priority)
        done = self._done[rid] = asyncio.Event()
        async with self._writing:
            trace.sent = time.perf_counter()
            await self._call.write(inference_pb2.GenerateRequest(submit=submit))
        await done.wait()
        return self._traces.pop(rid)


class VllmTarget:
    """vLLM's own gRPC server (smg-grpc-proto): one server-streaming Generate per request."""

    def __init__(self, address: str, *, name: str = "vllm") -> None:
        self.name = name
        self._address = address

    async def start(self) -> None:
        from smg_grpc_proto import vllm_engine_pb2, vllm_engine_pb2_grpc

        self._pb = vllm_engine_pb2
        self._channel = grpc.aio.insecure_channel(self._address)
        self._stub: Any = vllm_engine_pb2_grpc.VllmEngineStub(self._channel)  # smg_grpc_proto ships no type stubs

    async def close(self) -> None:
        await self._channel.close()

    async def run(self, request: BenchRequest) -> RequestTrace:
        params = self._pb.SamplingParams(temperature=0.7, top_p=1.0, max_tokens=request.max_tokens, n=1)
        prompt = f"<|im_start|>user\n{request.text}<|im_end|>\n<|im_start|>assistant\n"
        message = self._pb.GenerateRequest(
            request_id=uuid.uuid4().hex, text=prompt, sampling_params=params, stream=True
        )
        trace = RequestTrace(sent=time.perf_counter(), priority=request.priority)
        try:
            async for msg in self._stub.Generate(message):
                if msg.HasField("chunk") and msg.chunk.token_ids:
                    trace.chunks.append((time.perf_counter(), len(msg.chunk.token_ids)))
        except grpc.aio.AioRpcError as exc:
            trace.error = exc.code().name
        trace.done = time.perf_counter()
        return trace
