"""Prefix-cache hits of one long session once its history outgrows the budget: turn-by-turn vs chunked drops.

``python -m loadtest.session_prefix [--turns 30] [--budget 1200 400] [--redis-url URL]`` prints a
Markdown table for BENCHMARKS.md. Workload: one simulator replica (its prefix
cache hashes 16-token blocks as vLLM's does), one router, one session of
``turns`` turns opening with a 100-token system prompt, tools off, response
cache off. Per history budget, the router drops old turns one at a time
(``--history-keep 1``, the previous behaviour) and in chunks (the default,
``--history-keep 0.5``). Hit rate = prompt tokens served from the prefix
cache / prompt tokens, over the whole session and over the turns after the
budget was first reached (the turns the change is about); the last column
counts those turns whose cached prefix reached past the system prompt into
the history.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass

import redis.asyncio as aioredis
from google.rpc import status_pb2

from agentmesh.agent.v1 import agent_pb2
from meshkit.mesh import start_mesh
from meshkit.turns import converse

REDIS_URL = "redis://127.0.0.1:6379/15"
SYSTEM = " ".join(f"rule{i}" for i in range(100))
NO_TOOLS = agent_pb2.ToolChoice(mode=agent_pb2.TOOL_CHOICE_MODE_NONE)


@dataclass(frozen=True)
class SessionRun:
    """Per turn of one session: prompt tokens and how many of them the prefix cache served."""

    prompt: list[int]
    cached: list[int]

    def hit_rate(self, first: int = 0) -> float:
        total = sum(self.prompt[first:])
        return sum(self.cached[first:]) / total if total else 0.0

    def over_budget_from(self) -> int:
        """The first turn whose prompt stopped growing by a whole turn (history was cut)."""
        growth = [b - a for a, b in zip(self.prompt, self.prompt[1:], strict=False)]
        return next((i + 1 for i, g in enumerate(growth) if g < max(growth[:3], default=0) // 2), len(self.prompt))

    def beyond_system(self, system_tokens: int, first: int) -> int:
        return sum(c > system_tokens for c in self.cached[first:])


async def run_session(redis: aioredis.Redis, turns: int, budget: int, keep: float) -> SessionRun:
    mesh = await start_mesh(redis, replicas=1)
    try:
        stub = await mesh.add_router(response_cache_ttl_s=0, history_budget_tokens=budget, history_keep=keep)
        session, prompt, cached = "", [], []
        for t in range(turns):
            message = f"what happened on day {t} of the trip, and what did we eat?"
            start = agent_pb2.StartTurn(session_id=session, message=message, system_prompt=SYSTEM, tool_choice=NO_TOOLS)
            done = await converse(stub, start)
            if done.completed.status:  # e.g. NOT_FOUND: something flushed the Redis database under the run
                raise RuntimeError(f"turn {t} failed: {status_pb2.Status.FromString(done.completed.status)}")
            session = done.accepted.session_id
            prompt.append(done.completed.usage.prompt_tokens)
            cached.append(done.completed.usage.cached_prompt_tokens)
        return SessionRun(prompt, cached)
    finally:
        await mesh.close()


async def main_async(turns: int, budgets: list[int], redis_url: str) -> str:
    redis = aioredis.Redis.from_url(redis_url)
    lines = [
        f"One session, {turns} turns, 100-token system prompt, one simulator replica (16-token blocks).",
        "",
        "| history budget (tokens) | drops | hit rate, session | hit rate, after the budget is reached "
        "| of those, turns cached beyond the system prompt |",
        "|---:|---|---:|---:|---:|",
    ]
    try:
        for budget in budgets:
            for name, keep in (("turn by turn (before)", 1.0), ("in chunks (after)", 0.5)):
                run = await run_session(redis, turns, budget, keep)
                first = run.over_budget_from()
                lines.append(
                    f"| {budget} | {name} | {run.hit_rate():.3f} | {run.hit_rate(first):.3f} (turns {first + 1}+) "
                    f"| {run.beyond_system(len(SYSTEM.split()), first)} of {turns - first} |"
                )
    finally:
        await redis.aclose()
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--budget", type=int, nargs="+", default=[1200, 400])
    parser.add_argument("--redis-url", default=REDIS_URL, help="a database nothing flushes during the run")
    args = parser.parse_args(argv)
    print(asyncio.run(main_async(args.turns, args.budget, args.redis_url)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
