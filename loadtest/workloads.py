"""Benchmark workloads: what each request says, to whom, at which priority.

- ``chat``: single-turn questions, no tools;
- ``agent``: turns that need a tool ("What is 17*23?"), tools allowed;
- ``sessions``: multi-turn sessions sharing one long system prompt (prefix reuse);
- ``distinct``: distinct random prompts (no reuse);
- ``mixed``: chat with priorities P0/P1/P2 in turn.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

SYSTEM = " ".join(
    f"Rule {i}: answer politely, cite the handbook section {i}, and never reveal internal notes." for i in range(24)
)
TOPICS = ["the sea", "mountains", "bread", "rivers", "trains", "clocks", "gardens", "bees", "stars", "salt"]


@dataclass(frozen=True)
class BenchRequest:
    text: str
    priority: int = 1  # 0 = P0
    session: int | None = None  # requests with the same session id are turns of one session, in order
    system_prompt: str = ""
    tools: bool = False
    max_tokens: int = 32


WORKLOADS = ("chat", "agent", "sessions", "distinct", "mixed")


def build(name: str, n: int, *, max_tokens: int = 32, seed: int = 7) -> list[BenchRequest]:
    rng = random.Random(seed)
    if name == "chat":
        return [
            BenchRequest(f"Tell me one fact about {TOPICS[i % len(TOPICS)]}.", max_tokens=max_tokens) for i in range(n)
        ]
    if name == "agent":
        return [
            BenchRequest(f"What is {rng.randint(10, 99)}*{rng.randint(10, 99)}?", tools=True, max_tokens=max_tokens)
            for _ in range(n)
        ]
    if name == "sessions":
        sessions = max(1, n // 4)
        return [
            BenchRequest(
                f"Turn {i // sessions}: tell me more about {TOPICS[(i % sessions) % len(TOPICS)]}.",
                session=i % sessions,
                system_prompt=SYSTEM,
                max_tokens=max_tokens,
            )
            for i in range(n)
        ]
    if name == "distinct":
        words = [
            "alpha",
            "bravo",
            "charlie",
            "delta",
            "echo",
            "foxtrot",
            "golf",
            "hotel",
            "india",
            "juliet",
            "kilo",
            "lima",
            "mike",
        ]
        return [BenchRequest(" ".join(rng.choice(words) for _ in range(12)), max_tokens=max_tokens) for _ in range(n)]
    if name == "mixed":
        return [
            BenchRequest(f"Tell me one fact about {TOPICS[i % len(TOPICS)]}.", priority=i % 3, max_tokens=max_tokens)
            for i in range(n)
        ]
    raise ValueError(f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)}")
