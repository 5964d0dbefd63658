"""Benchmark: our inference service vs vLLM's own gRPC server, same model, same workload.

Both serve SmolLM2-135M-Instruct on vLLM (float32, prefix caching, eager) on
this machine. Each target runs alone (two vLLM engines on a 2-core box would
measure contention, not servers), rounds are interleaved A, B, A, B, and the
report compares ratios, not absolute times across runs.

Workloads (``--requests`` N at concurrency ``--concurrency`` C, greedy,
``--max-tokens`` each), with the chat template applied by this script so both
servers receive the same prompt text:
- ``shared-prefix``: one ~400-token system prompt, distinct questions;
- ``distinct``: short distinct prompts.

Clients: ours uses one multiplexed Generate stream for all requests (how the
router talks to a replica); theirs one server-streaming Generate per request
(their only mode). Ours returns text as well as token ids; theirs token ids only.

Usage: python -m loadtest.inference_vs_vllm [--rounds 2] [--requests 32] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from agentmesh.inference.v1 import inference_pb2, inference_pb2_grpc
from loadtest.stats import RequestTrace, Summary, summarize
from services.inference.config import default_model_dir
from services.runtime.health import wait_serving

ROOT = Path(__file__).resolve().parent.parent
SYSTEM = " ".join(
    f"Rule {i}: answer politely, cite the handbook section {i}, and never reveal internal notes." for i in range(24)
)
TOPICS = ["the sea", "mountains", "bread", "rivers", "trains", "clocks", "gardens", "bees", "stars", "salt"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def prompts(kind: str, n: int, tokenizer: Any) -> list[str]:
    out = []
    for i in range(n):
        question = f"Tell me one fact about {TOPICS[i % len(TOPICS)]} (#{i})."
        messages = [{"role": "user", "content": question}]
        if kind == "shared-prefix":
            messages.insert(0, {"role": "system", "content": SYSTEM})
        out.append(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
    return out


def start_ours(port: int, model: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "services.inference", "--port", str(port), "--metrics-port", "-1",
         "--model", model, "--max-num-seqs", "32", "--log-level", "warning"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def start_theirs(port: int, model: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "SMG_VLLM_SERVICER_WARMUP": "off",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "HF_HUB_OFFLINE": "1",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.launchers.grpc_server", "--host", "127.0.0.1",
         "--port", str(port), "--model", model, "--dtype", "float32", "--max-model-len", "2048",
         "--enforce-eager", "--enable-prefix-caching", "--max-num-seqs", "32", "--disable-log-stats"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


async def run_ours(target: str, texts: list[str], concurrency: int, max_tokens: int) -> list[RequestTrace]:
    """All requests on one multiplexed Generate stream, at most ``concurrency`` in flight."""
    traces = [RequestTrace(sent=0.0) for _ in texts]
    done = [asyncio.Event() for _ in texts]
    async with grpc.aio.insecure_channel(target, compression=grpc.Compression.Gzip) as channel:
        call: Any = inference_pb2_grpc.InferenceServiceStub(channel).Generate()

        async def read() -> None:
            async for frame in call:
                now = time.perf_counter()
                for d in frame.deltas:
                    i = int(d.request_id)
                    if d.token_count:
                        traces[i].chunks.append((now, d.token_count))
                    if d.HasField("result"):
                        if d.result.HasField("error"):
                            traces[i].error = d.result.error.message
                        traces[i].done = now
                        done[i].set()

        reader = asyncio.create_task(read())
        slots = asyncio.Semaphore(concurrency)
        writing = asyncio.Lock()  # grpc.aio allows one write in flight per call

        async def one(i: int) -> None:
            async with slots:
                s = inference_pb2.SubmitGeneration(request_id=str(i), text=texts[i])
                s.sampling.temperature = 0.0
                s.sampling.max_tokens = max_tokens
                async with writing:
                    traces[i].sent = time.perf_counter()
                    await call.write(inference_pb2.GenerateRequest(submit=s))
                await done[i].wait()

        await asyncio.gather(*(one(i) for i in range(len(texts))))
        await call.done_writing()
        await reader
    return traces


async def run_theirs(target: str, texts: list[str], concurrency: int, max_tokens: int) -> list[RequestTrace]:
    """One server-streaming Generate per request, at most ``concurrency`` at a time."""
    from smg_grpc_proto import vllm_engine_pb2, vllm_engine_pb2_grpc

    traces = [RequestTrace(sent=0.0) for _ in texts]
    async with grpc.aio.insecure_channel(target) as channel:
        stub = vllm_engine_pb2_grpc.VllmEngineStub(channel)
        slots = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            async with slots:
                params = vllm_engine_pb2.SamplingParams(temperature=0.0, top_p=1.0, max_tokens=max_tokens, n=1)
                req = vllm_engine_pb2.GenerateRequest(
                    request_id=f"b{i}", text=texts[i], sampling_params=params, stream=True
                )
                traces[i].sent = time.perf_counter()
                try:
                    async for msg in stub.Generate(req):
                        now = time.perf_counter()
                        if msg.HasField("chunk") and msg.chunk.token_ids:
                            traces[i].chunks.append((now, len(msg.chunk.token_ids)))
                        elif msg.HasField("complete"):
                            extra = len(msg.complete.output_ids) - traces[i].tokens
                            if extra > 0 and not traces[i].chunks:
                                traces[i].chunks.append((now, extra))
                    traces[i].done = time.perf_counter()
                except grpc.aio.AioRpcError as exc:
                    traces[i].error = exc.code().name

        await asyncio.gather(*(one(i) for i in range(len(texts))))
    return traces


Runner = Callable[[str, list[str], int, int], Awaitable[list[RequestTrace]]]


async def bench_target(
    name: str,
    start: Callable[[int, str], subprocess.Popen[bytes]],
    runner: Runner,
    args: argparse.Namespace,
    workloads: dict[str, list[str]],
) -> dict[str, Summary]:
    port = free_port()
    proc = start(port, args.model)
    target = f"127.0.0.1:{port}"
    try:
        await wait_serving(target, within_s=300, still_starting=lambda: proc.poll() is None)
        await runner(target, ["<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"] * 2, 2, 4)  # warm-up
        results = {}
        for kind, texts in workloads.items():
            t0 = time.perf_counter()
            traces = await runner(target, texts, args.concurrency, args.max_tokens)
            results[kind] = summarize(traces, time.perf_counter() - t0)
            print(f"  {name:6s} {kind:14s} {fmt(results[kind])}", flush=True)
        return results
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def fmt(s: Summary) -> str:
    return (
        f"tok/s {s.output_tok_s:7.1f}  TTFT p50 {s.ttft_p50 * 1e3:7.1f} ms p99 {s.ttft_p99 * 1e3:7.1f} ms  "
        f"ITL p50 {s.itl_p50 * 1e3:6.1f} ms p99 {s.itl_p99 * 1e3:6.1f} ms  errors {s.errors}"
    )


async def main_async(args: argparse.Namespace) -> int:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    workloads = {kind: prompts(kind, args.requests, tokenizer) for kind in ("shared-prefix", "distinct")}
    rounds: list[dict[str, dict[str, Summary]]] = []
    for r in range(args.rounds):
        print(f"round {r + 1}/{args.rounds}", flush=True)
        ours = await bench_target("ours", start_ours, run_ours, args, workloads)
        theirs = await bench_target("vllm", start_theirs, run_theirs, args, workloads)
        rounds.append({"ours": ours, "vllm": theirs})
    print("\nratios ours/vllm (mean over rounds; throughput > 1 and TTFT < 1 favour ours)")
    for kind in workloads:

        def mean(f: Callable[[Summary], float], who: str, k: str = kind) -> float:
            return sum(f(rd[who][k]) for rd in rounds) / len(rounds)

        thr = mean(lambda s: s.output_tok_s, "ours") / mean(lambda s: s.output_tok_s, "vllm")
        ttft = mean(lambda s: s.ttft_p50, "ours") / mean(lambda s: s.ttft_p50, "vllm")
        itl = mean(lambda s: s.itl_p50, "ours") / mean(lambda s: s.itl_p50, "vllm")
        print(f"  {kind:14s} throughput x{thr:.3f}  TTFT p50 x{ttft:.3f}  ITL p50 x{itl:.3f}")
    out = ROOT / "loadtest" / "results" / "inference_vs_vllm.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    report = [
        {who: {k: {**asdict(s), "output_tok_s": s.output_tok_s} for k, s in res.items()} for who, res in rd.items()}
        for rd in rounds
    ]
    out.write_text(json.dumps({"args": vars(args), "rounds": report}, indent=2))
    print(f"\nwrote {out.relative_to(ROOT)}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--model", default=default_model_dir())
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
