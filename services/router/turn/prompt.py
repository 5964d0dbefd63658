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
small model it is more likely to mislead than to help. Turns are dropped in
chunks (``history_cut``): once over budget, down to a fraction of it at once,
so the omitted count and the kept turns — the prompt's prefix after the system
prompt — stay the same for the many turns it takes to fill the budget again,
and the prefix cache keeps matching them. Dropping one turn at a time would
change that line on every turn, leaving only the system prompt cacheable. The
count is kept with the session, so every router renders the same prefix.
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

#: The system prompt of a session that brings none. Measured against the plainer "You are a helpful AI
#: assistant." on the embedded 135M model (EVAL.md, run G): that one answered more general-knowledge questions
#: (69/100 against 59/100, 68/100 against 65/100) but recalled less of the conversation (a fact said one turn
#: earlier: 12/20 against 15/20), and it moved no held-out verdict; this one stays.
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


def _cost(turn: PastTurn) -> int:
    return estimate_tokens([Message("user", turn.user), Message("assistant", turn.answer)])


def history_cut(
    turns: Sequence[PastTurn], budget_tokens: int, *, first: int = 0, omitted: int = 0, keep: float = 1.0
) -> int:
    """How many of the session's earliest turns the prompt leaves out.

    ``turns`` are the session's newest turns, ``turns[0]`` being the one after
    ``first`` earlier turns; ``omitted`` is the count the previous turn used.
    While the turns after ``omitted`` fit ``budget_tokens``, the count stays;
    once they do not, the oldest are dropped until the rest fits ``keep`` ×
    the budget (``keep=1``: only as many as must go, so the count changes on
    every turn from then on).
    """
    start = min(max(omitted, first), first + len(turns))
    costs = [_cost(t) for t in turns[start - first :]]
    total = sum(costs)
    if total <= budget_tokens:
        return start
    dropped = 0
    while dropped < len(costs) and total > keep * budget_tokens:
        total -= costs[dropped]
        dropped += 1
    return start + dropped


def render_history(turns: Sequence[PastTurn], cut: int, *, first: int = 0) -> list[Message]:
    """The turns after the first ``cut`` of the session, oldest first, after a note if any were left out."""
    kept = [m for t in turns[max(0, cut - first) :] for m in (Message("user", t.user), Message("assistant", t.answer))]
    if cut:
        kept.insert(0, Message("system", f"({cut} earlier turn{'s' if cut > 1 else ''} of this conversation omitted.)"))
    return kept


def history_messages(turns: Sequence[PastTurn], budget_tokens: int) -> list[Message]:
    """All of a session's turns compressed to ``budget_tokens``, dropping one turn at a time."""
    return render_history(turns, history_cut(turns, budget_tokens))


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
