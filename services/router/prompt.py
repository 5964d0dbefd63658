"""Prompt building: system prompt, history (compressed to a budget), the user's message, tool results.

Tool results are ``tool`` messages (``ROLE_TOOL`` on the wire, with the tool's
name), one per call, right after the user's message, and rendered by the
model's own chat template — never a system message in mid-conversation, which
stricter templates (Gemma, Mistral) reject. The inference service documents
what it does for templates that have no tool role (``services/inference/chat.py``).

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
from typing import NamedTuple

from agentmesh.common.v1 import common_pb2
from agentmesh.tools.v1 import tools_pb2


class Message(NamedTuple):
    """One chat message; ``tool_name`` names the tool of a ``tool`` message."""

    role: str
    content: str
    tool_name: str = ""


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
    return sum(len(m.content) // CHARS_PER_TOKEN + 4 for m in messages)


def history_messages(turns: Sequence[PastTurn], budget_tokens: int) -> list[Message]:
    """The most recent turns that fit ``budget_tokens``, oldest first, with a note if some were dropped."""
    kept: list[Message] = []
    used = 0
    dropped = 0
    for i in range(len(turns) - 1, -1, -1):
        pair = [Message("user", turns[i].user), Message("assistant", turns[i].answer)]
        cost = estimate_tokens(pair)
        if used + cost > budget_tokens:
            dropped = i + 1
            break
        kept[:0] = pair
        used += cost
    if dropped:
        kept.insert(
            0,
            Message("system", f"({dropped} earlier turn{'s' if dropped > 1 else ''} of this conversation omitted.)"),
        )
    return kept


def tool_messages(results: Sequence[tools_pb2.ToolResult], arguments: dict[str, str]) -> list[Message]:
    """One ``tool`` message per result, in call order: the call's arguments and output, or its failure."""
    messages = []
    for r in results:
        args = arguments.get(r.call_id, "")
        if r.status == common_pb2.TOOL_CALL_STATUS_OK:
            content = f"{r.tool_name}({args}) returned {r.output_json}"
        else:
            content = f"{r.tool_name}({args}) FAILED: {r.error_message or 'unknown error'}"
        messages.append(Message("tool", content, r.tool_name))
    return messages


def results_text(results: Sequence[tools_pb2.ToolResult], arguments: dict[str, str]) -> str:
    """The results as plain text, for prompts that are not the answer's (the LLM choose step)."""
    return "Tool results:\n" + "\n".join(m.content for m in tool_messages(results, arguments))


def answer_opening(results: Sequence[tools_pb2.ToolResult]) -> str:
    """The answer's first words, written by the tools: each result's summary, each failure as a failure.

    The model continues from here, so the numbers, units and times it states
    are the tools' own, whatever the model's size. Empty when any successful
    result has no summary (then the model opens the answer itself).
    """
    parts = []
    for r in results:
        if r.status == common_pb2.TOOL_CALL_STATUS_OK:
            if not r.summary:
                return ""
            parts.append(r.summary)
        else:
            parts.append(f"The {r.tool_name} tool failed: {(r.error_message or 'unknown error').rstrip('.')}.")
    return " ".join(parts)


def answer_messages(
    system_prompt: str,
    history: Sequence[Message],
    user_message: str,
    tool_results: Sequence[Message] = (),
    opening: str = "",
) -> list[Message]:
    """The answer's prompt; with an ``opening``, it ends in that partial assistant message to continue."""
    messages = [Message("system", system_prompt), *history, Message("user", user_message), *tool_results]
    if opening:
        messages.append(Message("assistant", opening))
    return messages
