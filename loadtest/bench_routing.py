"""The suite's ``routing`` and ``overload`` sections: where requests go across replicas, and what is shed.

Both run the in-process mesh (``meshkit``) against Redis: ``routing`` compares
replica placement policies by prefix-cache hit rate, ``overload`` drives the
gateway's admission at about three times its capacity with mixed priorities.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import redis.asyncio as aioredis

from loadtest.bench_env import API_KEY, REDIS_URL
from loadtest.report import ms
from loadtest.runner import LoadShape, drive
from loadtest.stats import Slo, by_priority, summarize
from loadtest.targets import AgentTarget
from loadtest.workloads import build
from meshkit.mesh import FAST_SIM, start_mesh
from meshkit.turns import converse
from services.router.replicas.picker import LeastLoadedPicker, ReplicaPicker, RoundRobinPicker


async def routing(quick: bool) -> str:
    from agentmesh.agent.v1 import agent_pb2

    redis = aioredis.Redis.from_url(REDIS_URL)
    system = " ".join(f"rule{i}" for i in range(100))
    sessions, turns = (7, 4) if quick else (11, 6)
    lines = [
        f"4 simulator replicas; {sessions} sessions × {turns} turns, each session's turns in order, sessions "
        "interleaved; a shared 100-token system prompt, then each session's own history; with 2 routers a "
        "session's turns alternate between them. Hit rate = prompt tokens served from the replicas' prefix "
        "caches / prompt tokens.",
        "",
        "| placement | routers | prefix-cache hit rate | TTFT p50 | turns/s |",
        "|---|---:|---:|---:|---:|",
    ]
    no_tools = agent_pb2.ToolChoice(mode=agent_pb2.TOOL_CHOICE_MODE_NONE)
    pickers: list[tuple[str, Callable[[], Any]]] = [
        ("prefix-aware (ours)", ReplicaPicker),
        ("round-robin", RoundRobinPicker),
        ("least-loaded", LeastLoadedPicker),
    ]
    for label, make_picker in pickers:
        for n_routers in (1, 2):
            await redis.flushdb()
            mesh = await start_mesh(redis, replicas=4)
            try:
                stubs = [await mesh.add_router(picker=make_picker(), response_cache_ttl_s=0) for _ in range(n_routers)]
                ids = [""] * sessions
                ttfts: list[float] = []
                start = time.perf_counter()
                for turn in range(turns):
                    for s in range(sessions):
                        req = agent_pb2.StartTurn(
                            session_id=ids[s],
                            message=f"session {s} turn {turn}",
                            system_prompt=system,
                            tool_choice=no_tools,
                        )
                        result = await converse(stubs[(s + turn) % n_routers], req)
                        ttfts.append(result.completed.time_to_first_token.ToNanoseconds() / 1e9)
                        ids[s] = result.accepted.session_id
                wall = time.perf_counter() - start
                ttfts.sort()
                lines.append(
                    f"| {label} | {n_routers} | {mesh.hit_rate():.3f} | {ttfts[len(ttfts) // 2] * 1e3:.1f} ms "
                    f"| {sessions * turns / wall:.1f} |"
                )
            finally:
                await mesh.close()
    await redis.flushdb()
    await redis.aclose()
    return "\n".join(lines)


async def overload(quick: bool) -> str:
    redis = aioredis.Redis.from_url(REDIS_URL)
    await redis.flushdb()
    sim = replace(FAST_SIM, output_tokens=20, decode_base_s=0.01, max_batch=64)
    mesh = await start_mesh(redis, replicas=2, sim=sim)
    try:
        await mesh.add_router(response_cache_ttl_s=0)
        _, _, server = await mesh.add_gateway(
            keys=f"bench:{API_KEY}",
            rate_rps=1e5,
            rate_burst=1e5,
            rate_window_max=10**7,
            concurrency_initial=4.0,
            concurrency_min=4.0,
            concurrency_max=4.0,
            slo_p0_s=1.5,
            slo_p1_s=1.0,
            slo_p2_s=0.3,
        )
        target = AgentTarget(server.address, api_key=API_KEY, name="gateway")
        await target.start()
        n = 60 if quick else 180
        rate = 60.0  # capacity ≈ 4 slots / 0.2 s = 20 requests/s → 3×
        traces, wall = await drive(target, build("mixed", n + 2, max_tokens=20), LoadShape(rate_rps=rate, warmup=2))
        await target.close()
    finally:
        await mesh.close()
        await redis.flushdb()
        await redis.aclose()
    slo = Slo(ttft_s=1.5)
    parts = by_priority(traces, wall, slo)
    lines = [
        f"{n} Complete requests at {rate:.0f}/s (Poisson; capacity ≈ 20/s: 4 admission slots × ~0.2 s each), "
        "P0/P1/P2 in turn; queue-wait SLOs P0 1.5 s, P1 1 s, P2 0.3 s; goodput = requests with TTFT ≤ 1.5 s.",
        "",
        "| class | served | shed (RESOURCE_EXHAUSTED) | E2E p50 | E2E p99 | goodput req/s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for p, s in parts.items():
        shed = s.errors_by_code.get("RESOURCE_EXHAUSTED", 0)
        lines.append(
            f"| P{p} | {s.requests - s.errors}/{s.requests} | {shed} ({shed / max(1, s.requests):.0%}) "
            f"| {ms(s.e2e.p50)} ms | {ms(s.e2e.p99)} ms | {s.goodput_rps:.2f} |"
        )
    total = summarize(traces, wall, slo)
    other = {k: v for k, v in total.errors_by_code.items() if k != "RESOURCE_EXHAUSTED"}
    lines += ["", f"Total goodput {total.goodput_rps:.2f} req/s; errors other than shedding: {other or 'none'}."]
    return "\n".join(lines)
