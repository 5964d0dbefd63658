"""The plan step: the model chooses tools, then fills in their arguments, both as constrained JSON.

Planning is split in two small decisions because a small model makes small
decisions far more reliably than one big one:

1. **choose** — ``{"tools": [...]}``, each item an enum of the registered tool
   names (empty list: answer directly). Tool choice shapes the schema:
   ``required`` sets ``minItems: 1``; a named tool skips this step; ``none``
   skips planning altogether.
2. **fill** — for each chosen tool, its arguments, constrained by that tool's
   own JSON schema from ``ListTools``. The fills of one round run concurrently
   (the replica batches them).

Both prompts are instructions plus worked examples (only for tools that
exist), then the user's message. The examples are ordered by similarity to
the message, most similar last: small models lean heavily on the nearest
example (measured on the embedded SmolLM2-135M: with a fixed order it copied
the last example's answer for almost every message), so the lean is pointed
where it helps — dynamic few-shot selection. Larger models use the whole list
either way. The instructions and tool list stay a fixed prefix.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentmesh.common.v1 import common_pb2
from services.router.prompt import Message

log = logging.getLogger(__name__)

MAX_CALLS_PER_ROUND = 3

#: (message, tools it needs). Examples naming a tool that is not registered are left out.
CHOOSE_EXAMPLES: list[tuple[str, list[str]]] = [
    ("What is 12*9?", ["calculator"]),
    ("What time is it in London?", ["clock"]),
    ("Write a short poem about trees.", []),
    ("Convert 5 km to miles.", ["unit_convert"]),
    ("Hello! How are you?", []),
    ("How much is 150 divided by 6?", ["calculator"]),
    ("What is the current time in New York?", ["clock"]),
    ("Tell me a story about a dragon.", []),
    ("How does AgentMesh pick an inference replica?", ["kb_search"]),
    ("What is the capital of Italy?", []),
]

#: Per tool: (message, arguments) examples for the fill step.
FILL_EXAMPLES: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "calculator": [
        ("What is 12*9?", {"expression": "12*9"}),
        ("How much is 150 divided by 6?", {"expression": "150/6"}),
        ("What is 7 plus 35?", {"expression": "7+35"}),
    ],
    "clock": [
        ("What time is it in London?", {"timezone": "Europe/London"}),
        ("What is the current time in New York?", {"timezone": "America/New_York"}),
        ("What time is it in Paris?", {"timezone": "Europe/Paris"}),
    ],
    "unit_convert": [
        ("Convert 5 km to miles.", {"value": 5, "from_unit": "km", "to_unit": "mi"}),
        ("How many pounds is 3 kg?", {"value": 3, "from_unit": "kg", "to_unit": "lb"}),
    ],
    "kb_search": [("How does AgentMesh pick an inference replica?", {"query": "pick inference replica"})],
    "http_get": [("Fetch https://example.com/status", {"url": "https://example.com/status"})],
}


_WORD = re.compile(r"[a-z]+|[0-9]+(?:\.[0-9]+)?|[-+*/^%]")
_STOP = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "how", "i", "in", "is",
     "it", "many", "me", "much", "my", "of", "on", "or", "please", "the", "to", "what", "you"]
)  # fmt: skip


def _features(text: str) -> set[str]:
    """Content words of a message, with numbers and operators as classes (so 23*47 is like 12*9)."""
    out = set()
    for token in _WORD.findall(text.lower()):
        if token[0].isdigit():
            out.add("<number>")
        elif token in "-+*/^%":
            out.add("<operator>")
        elif token not in _STOP:
            out.add(token.rstrip("s") if len(token) > 3 else token)
    return out


def by_similarity(message: str, examples: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Examples ordered least to most similar to ``message`` (Jaccard on content words); ties keep order."""
    target = _features(message)

    def score(example: tuple[str, Any]) -> float:
        words = _features(example[0])
        union = target | words
        return len(target & words) / len(union) if union else 0.0

    return sorted(examples, key=score)


@dataclass(frozen=True)
class PlannedCall:
    name: str
    arguments: dict[str, Any]

    @property
    def arguments_json(self) -> str:
        return json.dumps(self.arguments, sort_keys=True, separators=(",", ":"))


def choose_schema(tools: Sequence[common_pb2.ToolSpec], mode: str) -> dict[str, Any]:
    """JSON schema of step 1 under a tool-choice mode (auto or required)."""
    names = [t.name for t in tools]
    calls: dict[str, Any] = {"type": "array", "items": {"enum": names}, "maxItems": MAX_CALLS_PER_ROUND}
    if mode == "required":
        calls["minItems"] = 1
    return {"type": "object", "properties": {"tools": calls}, "required": ["tools"], "additionalProperties": False}


def choose_messages(
    tools: Sequence[common_pb2.ToolSpec], user_message: str, previous_results: Message | None = None
) -> list[Message]:
    names = {t.name for t in tools}
    system = (
        "Decide which tools are needed to answer the user's message. Tools:\n"
        + "\n".join(f"- {t.name}: {t.description}" for t in tools)
        + '\nReply with JSON: {"tools": [...]}. Use an empty list when no tool is needed '
        "(writing, greetings, opinions, general knowledge)."
    )
    messages: list[Message] = [("system", system)]
    usable = [(q, needed) for q, needed in CHOOSE_EXAMPLES if all(n in names for n in needed)]
    for question, needed in by_similarity(user_message, usable):
        messages.append(("user", question))
        messages.append(("assistant", json.dumps({"tools": needed})))
    messages.append(("user", user_message))
    if previous_results is not None:
        messages.append(("system", previous_results[1] + "\nIf these results answer the message, choose no tool."))
    return messages


def fill_messages(tool: common_pb2.ToolSpec, user_message: str) -> list[Message]:
    schema = json.loads(tool.parameters_json_schema)
    params = ", ".join(f"{k} ({v.get('type', 'any')})" for k, v in schema.get("properties", {}).items())
    system = (
        f"Write the arguments of the {tool.name} tool ({tool.description}) for the user's message, as JSON. "
        f"Arguments: {params}."
    )
    messages: list[Message] = [("system", system)]
    for question, args in by_similarity(user_message, FILL_EXAMPLES.get(tool.name, [])):
        messages.append(("user", question))
        messages.append(("assistant", json.dumps(args)))
    messages.append(("user", user_message))
    return messages


def parse_choice(text: str, tools: Sequence[common_pb2.ToolSpec]) -> list[str]:
    """Tool names from step 1; unparseable output (e.g. cut off) chooses nothing."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        log.warning("unparseable tool choice: %r", text[:200])
        return []
    names = {t.name for t in tools}
    chosen = data.get("tools", []) if isinstance(data, dict) else []
    unique = list(dict.fromkeys(n for n in chosen if isinstance(n, str) and n in names))
    return unique[:MAX_CALLS_PER_ROUND]


_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")


def _numbers(value: Any) -> set[float]:
    if isinstance(value, bool):
        return set()
    if isinstance(value, (int, float)):
        return {float(value)}
    if isinstance(value, str):
        return {float(n) for n in _NUMBER.findall(value)}
    if isinstance(value, dict):
        return set().union(*(_numbers(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_numbers(v) for v in value)) if value else set()
    return set()


def grounded(call: PlannedCall, user_message: str) -> bool:
    """False when the arguments carry a number the user never wrote: the model made it up.

    A small model asked to fill arguments for a tool the message does not need
    tends to invent values (10.0, 10000001); an invented number is never right.
    """
    return _numbers(call.arguments) <= {abs(n) for n in _numbers(user_message)} | _numbers(user_message)


def parse_arguments(text: str) -> dict[str, Any] | None:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        log.warning("unparseable tool arguments: %r", text[:200])
        return None
    return data if isinstance(data, dict) else None
