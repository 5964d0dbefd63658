"""How the benchmark against vLLM calls each server: closed loop, at most ``concurrency`` requests in flight.

Every runner takes the same ``Prompt``s and returns, per request in order, a
``RequestTrace`` (timing) and a ``Completion`` (the answer and its token
accounting, to check that both sides answered alike). All ask for greedy
decoding and ``max_tokens``.

- ``run_inference``: our inference service, every request on one multiplexed
  Generate stream (how the router talks to a replica), the chat messages
  rendered by the service's chat template;
- ``run_mesh``: the gateway's public ``Complete``, one call per request, with
  the API key; the system prompt and user message travel as such and the
  template is applied on the replica. The stream carries text, not token
  counts: the reported completion tokens are spread over its messages;
- ``run_vllm``: vLLM's gRPC server, one server-streaming Generate per request
  (its only mode), sent the token ids of the same template, so its prompt
  tokens are ours exactly; it answers with token ids (decoded afterwards).

No client compresses, so each side's client does the same work.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import grpc
import grpc.aio

from agentmesh.agent.v1 import agent_pb2, agent_pb2_grpc
from agentmesh.common.v1 import common_pb2
from agentmesh.inference.v1 import inference_pb2, inference_pb2_grpc
from loadtest.engine_servers import MESH_API_KEY
from loadtest.head_to_head import Completion, Prompt, spread_tokens
from loadtest.stats import RequestTrace

Results = tuple[list[RequestTrace], list[Completion]]
Runner = Callable[[str, Sequence[Prompt], int, int], Awaitable[Results]]


async def run_inference(target: str, prompts: Sequence[Prompt], concurrency: int, max_tokens: int) -> Results:
    traces = [RequestTrace(sent=0.0) for _ in prompts]
    answers = [Completion() for _ in prompts]
    done = [asyncio.Event() for _ in prompts]
    async with grpc.aio.insecure_channel(target) as channel:
        call = inference_pb2_grpc.InferenceServiceStub(channel).Generate()

        async def read() -> None:
            async for frame in call:
                now = time.perf_counter()
                for d in frame.deltas:
                    i = int(d.request_id)
                    answers[i].text += d.text
                    if d.token_count:
                        traces[i].chunks.append((now, d.token_count))
                    if d.HasField("result"):
                        if d.result.HasField("error"):
                            traces[i].error = d.result.error.message
                        answers[i].prompt_tokens = d.result.usage.prompt_tokens
                        answers[i].completion_tokens = d.result.usage.completion_tokens
                        traces[i].done = now
                        done[i].set()

        reader = asyncio.create_task(read())
        slots = asyncio.Semaphore(concurrency)
        writing = asyncio.Lock()  # grpc.aio allows one write in flight per call

        async def one(i: int) -> None:
            async with slots:
                submit = inference_pb2.SubmitGeneration(request_id=str(i))
                if prompts[i].system:
                    submit.chat.messages.add(role=common_pb2.ROLE_SYSTEM, content=prompts[i].system)
                submit.chat.messages.add(role=common_pb2.ROLE_USER, content=prompts[i].user)
                submit.chat.add_generation_prompt = True
                submit.sampling.temperature = 0.0
                submit.sampling.max_tokens = max_tokens
                async with writing:
                    traces[i].sent = time.perf_counter()
                    await call.write(inference_pb2.GenerateRequest(submit=submit))
                await done[i].wait()

        await asyncio.gather(*(one(i) for i in range(len(prompts))))
        await call.done_writing()
        await reader
    return traces, answers


async def run_mesh(target: str, prompts: Sequence[Prompt], concurrency: int, max_tokens: int) -> Results:
    traces = [RequestTrace(sent=0.0) for _ in prompts]
    answers = [Completion() for _ in prompts]
    metadata = (("authorization", f"Bearer {MESH_API_KEY}"),)
    async with grpc.aio.insecure_channel(target) as channel:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        slots = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            request = agent_pb2.CompleteRequest(prompt=prompts[i].user, system_prompt=prompts[i].system)
            request.sampling.temperature = 0.0
            request.sampling.max_tokens = max_tokens
            trace, answer = traces[i], answers[i]
            async with slots:
                trace.sent = time.perf_counter()
                try:
                    async for event in stub.Complete(request, metadata=metadata):
                        if event.HasField("text_delta") and event.text_delta.text:
                            trace.chunks.append((time.perf_counter(), 1))
                            answer.text += event.text_delta.text
                        elif event.HasField("finished"):
                            answer.prompt_tokens = event.finished.usage.prompt_tokens
                            answer.completion_tokens = event.finished.usage.completion_tokens
                    trace.done = time.perf_counter()
                    spread_tokens(trace, answer.completion_tokens)
                except grpc.aio.AioRpcError as exc:
                    trace.error = exc.code().name
                    if not failed:  # the first failure's details, for the run's log
                        print(f"    mesh: request {i} failed: {exc.code().name}: {exc.details()}", file=sys.stderr)
                    failed.append(i)

        failed: list[int] = []
        await asyncio.gather(*(one(i) for i in range(len(prompts))))
    return traces, answers


async def run_vllm(target: str, prompts: Sequence[Prompt], concurrency: int, max_tokens: int) -> Results:
    from smg_grpc_proto import vllm_engine_pb2, vllm_engine_pb2_grpc

    traces = [RequestTrace(sent=0.0) for _ in prompts]
    answers = [Completion() for _ in prompts]
    async with grpc.aio.insecure_channel(target) as channel:
        stub: Any = vllm_engine_pb2_grpc.VllmEngineStub(channel)  # smg_grpc_proto ships no type stubs
        slots = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            params = vllm_engine_pb2.SamplingParams(temperature=0.0, top_p=1.0, max_tokens=max_tokens, n=1)
            request = vllm_engine_pb2.GenerateRequest(
                request_id=f"h2h-{i}-{time.monotonic_ns()}",
                tokenized=vllm_engine_pb2.TokenizedInput(input_ids=prompts[i].token_ids),
                sampling_params=params,
                stream=True,
            )
            trace, answer = traces[i], answers[i]
            async with slots:
                trace.sent = time.perf_counter()
                try:
                    async for msg in stub.Generate(request):
                        if msg.HasField("chunk") and msg.chunk.token_ids:
                            trace.chunks.append((time.perf_counter(), len(msg.chunk.token_ids)))
                            answer.token_ids.extend(msg.chunk.token_ids)
                        elif msg.HasField("complete"):  # streamed: repeats the last chunk's tokens
                            answer.prompt_tokens = msg.complete.prompt_tokens
                    trace.done = time.perf_counter()
                    answer.completion_tokens = len(answer.token_ids)
                except grpc.aio.AioRpcError as exc:
                    trace.error = exc.code().name

        await asyncio.gather(*(one(i) for i in range(len(prompts))))
    return traces, answers
