"""Prompt building: system prompt, history (compressed to a budget), the user's message, tool results.

History compression: when the rendered history exceeds ``budget_tokens``
(estimated at 4 characters per token; the replica checks exact counts), the
oldest turns are dropped and replaced by one system line saying how many were
left out, keeping the system prompt and the most recent turns. We drop rather
than summarise: a summary costs a generation on every long turn, and on a
small model it is more likely to mislead than to help. Dropping from the
middle of the history also keeps the session's prefix stable between turns
until the budget is hit, which is what the prefix cache needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentmesh.tools.v1 import tools_pb2

Message = tuple[str, str]  # (role, content)

CHARS_PER_TOKEN = 4

DEFAULT_SYSTEM_PROMPT = (
    "You are AgentMesh, a helpful and concise assistant. "
    "When tool results are given, base your answer on them and state the result plainly."
)


@dataclass(frozen=True)
class PastTurn:
    user: str
    answer: str


def estimate_tokens(messages: Sequence[Message]) -> int:
    return sum(len(content) // CHARS_PER_TOKEN + 4 for _, content in messages)


def history_messages(turns: Sequence[PastTurn], budget_tokens: int) -> list[Message]:
    """The most recent turns that fit ``budget_tokens``, oldest first, with a note if some were dropped."""
    kept: list[Message] = []
    used = 0
    dropped = 0
    for i in range(len(turns) - 1, -1, -1):
        pair = [("user", turns[i].user), ("assistant", turns[i].answer)]
        cost = estimate_tokens(pair)
        if used + cost > budget_tokens:
            dropped = i + 1
            break
        kept[:0] = pair
        used += cost
    if dropped:
        kept.insert(
            0,
            ("system", f"({dropped} earlier turn{'s' if dropped > 1 else ''} of this conversation omitted.)"),
        )
    return kept


def tool_results_message(results: Sequence[tools_pb2.ToolResult], arguments: dict[str, str]) -> Message:
    """Tool results as one message the model reads before answering (failures shown as failures)."""
    lines = []
    for r in results:
        call = f"{r.tool_name}({arguments.get(r.call_id, '')})"
        if r.output_json:
            lines.append(f"{call} returned {r.output_json}")
        else:
            lines.append(f"{call} FAILED: {r.error_message or 'unknown error'}")
    return (
        "system",
        "Tool results:\n" + "\n".join(lines) + "\nAnswer the user's question using these results.",
    )


def answer_messages(
    system_prompt: str,
    history: Sequence[Message],
    user_message: str,
    tool_results: Sequence[Message] = (),
) -> list[Message]:
    return [("system", system_prompt), *history, ("user", user_message), *tool_results]
