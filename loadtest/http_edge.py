"""What the OpenAI-compatible HTTP edge costs over calling the gateway's gRPC API directly.

``python -m loadtest.http_edge [--rounds N] [--tokens T]``

One in-process mesh (a simulator replica at a fixed 5 ms per token, a tool executor, a router with the
response cache off, a gateway with limits out of the way, and the HTTP edge in front of it), one request
at a time, so the numbers are latency, not throughput. Each round runs every path once, in a rotating
order so machine noise hits all of them alike:

- ``grpc complete`` / ``grpc turn`` — the typed client straight to the gateway (Complete; a Converse
  turn without tools);
- ``http stream`` / ``http agent stream`` — the OpenAI SDK's wire format over httpx (SSE), the same
  work through the edge (a plain model; ``agentmesh-agent``);
- ``http whole`` — a non-streamed completion through the edge.

TTFT is the first answer text the caller sees; E2E the end of the answer. Ratios are against the gRPC
path doing the same work. Results print as a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace

import httpx
import redis.asyncio as aioredis
import uvloop

from agentmesh_client import AgentClient, RetryPolicy, Sampling, TextDelta
from gateway.http_edge import HttpEdge
from loadtest.stats import Distribution
from meshkit.mesh import FAST_SIM, start_mesh

REDIS_URL = os.environ.get("AGENTMESH_BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
KEY = "acme-secret-key"
#: (time to first text, end to end) of one request, seconds.
Timing = tuple[float, float]
Probe = Callable[[str], Awaitable[Timing]]


async def grpc_complete(client: AgentClient, tokens: int, prompt: str) -> Timing:
    began, first = time.perf_counter(), 0.0
    async for event in client.complete(prompt, sampling=Sampling(max_tokens=tokens)):
        if isinstance(event, TextDelta) and not first:
            first = time.perf_counter()
    return first - began, time.perf_counter() - began


async def grpc_turn(client: AgentClient, tokens: int, prompt: str) -> Timing:
    began, first = time.perf_counter(), 0.0
    async with client.conversation() as chat:
        async for event in client.turn(chat, prompt, tools="none", sampling=Sampling(max_tokens=tokens)):
            if isinstance(event, TextDelta) and not first:
                first = time.perf_counter()
    return first - began, time.perf_counter() - began


async def http_call(http: httpx.AsyncClient, body: dict[str, object], prompt: str) -> Timing:
    body = {**body, "messages": [{"role": "user", "content": prompt}]}
    began, first = time.perf_counter(), 0.0
    if not body.get("stream"):
        reply = await http.post("/chat/completions", json=body)
        reply.raise_for_status()
        end = time.perf_counter()
        return end - began, end - began
    async with http.stream("POST", "/chat/completions", json=body) as reply:
        reply.raise_for_status()
        async for line in reply.aiter_lines():
            if not first and _has_content(line):
                first = time.perf_counter()
    return first - began, time.perf_counter() - began


def _has_content(line: str) -> bool:
    """Whether an SSE line is a chunk with answer text (not the role chunk, a tool event or the usage)."""
    if not line.startswith("data: {"):
        return False
    choices = json.loads(line.removeprefix("data: ")).get("choices") or [{}]
    return bool(choices[0].get("delta", {}).get("content"))


async def measure(rounds: int, tokens: int) -> dict[str, list[Timing]]:
    redis = aioredis.Redis.from_url(REDIS_URL)
    mesh = await start_mesh(redis, replicas=1, sim=replace(FAST_SIM, output_tokens=tokens, decode_base_s=0.005))
    await mesh.add_router(response_cache_ttl_s=0)
    _, _, server = await mesh.add_gateway(
        rate_limit_backend="memory", rate_rps=1e6, rate_burst=1e6, rate_window_max=10**9
    )
    edge = HttpEdge(server.address, timeout_s=60, completion_model="sim")
    await edge.start("127.0.0.1", 0, grace_s=0)
    client = AgentClient.connect(server.address, api_key=KEY, retry=RetryPolicy.never())
    http = httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{edge.port}/v1", headers={"Authorization": f"Bearer {KEY}"}, timeout=60
    )
    plain: dict[str, object] = {"model": "sim", "max_tokens": tokens}
    probes: dict[str, Probe] = {
        "grpc complete": lambda p: grpc_complete(client, tokens, p),
        "http stream": lambda p: http_call(http, {**plain, "stream": True}, p),
        "http whole": lambda p: http_call(http, plain, p),
        "grpc turn": lambda p: grpc_turn(client, tokens, p),
        "http agent stream": lambda p: http_call(
            http, {**plain, "model": "agentmesh-agent", "tool_choice": "none", "stream": True}, p
        ),
    }
    results: dict[str, list[Timing]] = {name: [] for name in probes}
    names = list(probes)
    try:
        for name in names:  # warm-up: channels, connections, code paths
            await probes[name](f"warm {uuid.uuid4().hex}")
        for r in range(rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                results[name].append(await probes[name](f"round {r} {uuid.uuid4().hex}"))
    finally:
        await http.aclose()
        await client.close()
        await edge.close()
        await mesh.close()
        await redis.aclose()
    return results


def table(results: dict[str, list[Timing]]) -> str:
    base = {"complete": results["grpc complete"], "turn": results["grpc turn"]}
    rows = [
        "| path | TTFT mean / p50 / p90 (ms) | E2E mean / p50 / p90 (ms) | E2E p50 vs gRPC | added p50 (ms) |",
        "|---|---|---|---|---|",
    ]
    for name, timings in results.items():
        ttft = Distribution.of([t for t, _ in timings])
        e2e = Distribution.of([e for _, e in timings])
        ref = Distribution.of([e for _, e in base["turn" if "turn" in name or "agent" in name else "complete"]])
        rows.append(
            f"| {name} | {ttft.mean * 1e3:.1f} / {ttft.p50 * 1e3:.1f} / {ttft.p90 * 1e3:.1f} "
            f"| {e2e.mean * 1e3:.1f} / {e2e.p50 * 1e3:.1f} / {e2e.p90 * 1e3:.1f} "
            f"| {e2e.p50 / ref.p50:.3f} | {(e2e.p50 - ref.p50) * 1e3:+.1f} |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--tokens", type=int, default=32, help="answer length (simulator: 5 ms per token)")
    args = parser.parse_args()
    results = uvloop.run(measure(args.rounds, args.tokens))
    print(f"{args.rounds} rounds × 5 paths, {args.tokens} tokens each, one request at a time:\n")
    print(table(results))


if __name__ == "__main__":
    main()
