"""What tenant isolation costs in prefix-cache hit rate, on the routing suite's prefix workload.

``python -m loadtest.isolation [--quick]`` prints a Markdown table for BENCHMARKS.md.
Workload (as the suite's ``routing`` section): 4 simulator replicas, one
prefix-aware router, sessions × turns in order, sessions interleaved, every
turn opening with the same 100-token system prompt and then its session's
history. Session ``s`` belongs to tenant ``s % tenants``. Per tenant count, the
router runs with the prefix cache salted per tenant (the default) and shared
across tenants (``--share-prefix-cache``). Hit rate = prompt tokens served from
the replicas' prefix caches / prompt tokens.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

import redis.asyncio as aioredis

from agentmesh.agent.v1 import agent_pb2
from meshkit.mesh import start_mesh
from meshkit.turns import converse

REDIS_URL = "redis://127.0.0.1:6379/15"
SYSTEM = " ".join(f"rule{i}" for i in range(100))


async def hit_rate(redis: aioredis.Redis, tenants: int, shared: bool, sessions: int, turns: int) -> float:
    await redis.flushdb()
    mesh = await start_mesh(redis, replicas=4)
    try:
        stub = await mesh.add_router(response_cache_ttl_s=0, share_prefix_cache=shared)
        no_tools = agent_pb2.ToolChoice(mode=agent_pb2.TOOL_CHOICE_MODE_NONE)
        ids = [""] * sessions
        for turn in range(turns):
            for s in range(sessions):
                start = agent_pb2.StartTurn(
                    session_id=ids[s], message=f"session {s} turn {turn}", system_prompt=SYSTEM, tool_choice=no_tools
                )
                result = await converse(stub, start, metadata=[("x-agentmesh-tenant", f"tenant-{s % tenants}")])
                ids[s] = result.accepted.session_id
        return mesh.hit_rate()
    finally:
        await mesh.close()


async def main_async(quick: bool) -> str:
    sessions, turns = (7, 4) if quick else (11, 6)
    redis = aioredis.Redis.from_url(REDIS_URL)
    lines = [
        f"{sessions} sessions × {turns} turns; session s belongs to tenant s mod T.",
        "",
        "| tenants T | hit rate, salted per tenant (default) | hit rate, shared (`--share-prefix-cache`) "
        "| lost to isolation |",
        "|---:|---:|---:|---:|",
    ]
    try:
        for tenants in (1, 4, sessions):
            salted = await hit_rate(redis, tenants, False, sessions, turns)
            shared = await hit_rate(redis, tenants, True, sessions, turns)
            lines.append(f"| {tenants} | {salted:.3f} | {shared:.3f} | {shared - salted:+.3f} |")
    finally:
        await redis.flushdb()
        await redis.aclose()
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sessions and turns")
    args = parser.parse_args(argv)
    print(asyncio.run(main_async(args.quick)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
