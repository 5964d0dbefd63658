"""Planning prompts: the model chooses tools (LLM selection) and fills in their arguments, as constrained JSON.

Two small decisions, because a small model makes small decisions far more
reliably than one big one:

1. **choose** — ``{"tools": [...]}``, each item an enum of the candidate tool
   names (empty list: answer directly). Used by ``--tool-selection llm`` for
   every message and by the embedding selector for its ambiguous band only.
   ``required`` sets ``minItems: 1``.
2. **fill** — for one chosen tool, its arguments, constrained by the tool's own
   JSON schema from ``ListTools``. The fills of one round run concurrently (the
   replica batches them).

Every worked example comes from the tools themselves (``ToolSpec.examples``
with arguments for fill; examples and near misses for choose), so a new tool
needs no change here. The examples are ordered by similarity to the message,
most similar last: small models lean heavily on the nearest example (measured
on the embedded SmolLM2-135M: with a fixed order it copied the last example's
answer for almost every message), so the lean is pointed where it helps —
dynamic few-shot selection. Larger models use the whole list either way.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from agentmesh.common.v1 import common_pb2
from services.router.planning.cards import name_words
from services.router.planning.no_tool_examples import NO_TOOL_EXAMPLES
from services.router.turn.prompt import Message
from services.runtime.language import ENGLISH, Language

log = logging.getLogger(__name__)

MAX_CALLS_PER_ROUND = 3
#: Worked examples per prompt: enough to show the shape, few enough to keep the prompt short (5, not 3: the
#: composed arithmetic fills of the tuning turns were 2-3 more of 35-36 right in each of three offline
#: comparisons, EVAL.md run E).
FILL_EXAMPLES = 5
CHOOSE_EXAMPLES_PER_TOOL = 2
CHOOSE_NEGATIVES = 4


def by_similarity(
    message: str, examples: Sequence[tuple[str, Any]], language: Language = ENGLISH
) -> list[tuple[str, Any]]:
    """Examples ordered least to most similar to ``message`` (Jaccard on the language's features); ties keep
    order."""
    target = language.features(message)

    def score(example: tuple[str, Any]) -> float:
        words = language.features(example[0])
        union = target | words
        return len(target & words) / len(union) if union else 0.0

    return sorted(examples, key=score)


def choose_schema(candidates: Sequence[str], mode: str) -> dict[str, Any]:
    """JSON schema of the choose step over ``candidates`` under a tool-choice mode (auto or required)."""
    calls: dict[str, Any] = {"type": "array", "items": {"enum": list(candidates)}, "maxItems": MAX_CALLS_PER_ROUND}
    if mode == "required":
        calls["minItems"] = 1
    return {"type": "object", "properties": {"tools": calls}, "required": ["tools"], "additionalProperties": False}


def choose_messages(
    tools: Sequence[common_pb2.ToolSpec],
    user_message: str,
    previous_results: str | None = None,
    no_tool: Sequence[str] = NO_TOOL_EXAMPLES,
) -> list[Message]:
    """The choose prompt among ``tools``: their descriptions, then worked examples nearest the message.

    The "no tool" examples are ``no_tool`` (requests no tool serves) and, when one tool is the only
    candidate, that tool's near misses. With several candidates a near miss of one may be another's ask:
    "How many hours are in a week?" is a time tool's near miss and an arithmetic tool's business, and
    shown as needing no tool it taught the model to answer an arithmetic ask by itself.
    """
    system = (
        "Decide which tools are needed to answer the user's message. Tools:\n"
        + "\n".join(f"- {t.name}: {t.description}" for t in tools)
        + '\nReply with JSON: {"tools": [...]}. Use an empty list when no tool is needed '
        "(writing, greetings, opinions, general knowledge)."
    )
    examples: list[tuple[str, list[str]]] = []
    for tool in tools:
        mine = [(e.text, [tool.name]) for e in tool.examples]
        examples += by_similarity(user_message, mine)[-CHOOSE_EXAMPLES_PER_TOOL:]
    misses = [n for t in tools for n in t.negative_examples] if len(tools) == 1 else []
    negatives = [(n, list[str]()) for n in [*no_tool, *misses]]
    examples += by_similarity(user_message, negatives)[-CHOOSE_NEGATIVES:]
    messages: list[Message] = [Message("system", system)]
    for question, needed in by_similarity(user_message, examples):
        messages.append(Message("user", question))
        messages.append(Message("assistant", _compact({"tools": needed})))
    messages.append(Message("user", user_message))
    if previous_results is not None:
        messages.append(Message("user", previous_results + "\nIf these results answer my message, choose no tool."))
    return messages


#: The tool name of "no call" in the band's one-generation decision (``call_schema``).
NO_CALL = "none"
CALL_SHOTS = 3


def call_schema(tools: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """JSON schema of the band's decision: one call of one of ``tools`` ((name, parameters schema JSON),
    already copy-constrained) with its arguments, or ``{"tool": "none"}``."""
    options: list[dict[str, Any]] = [
        {
            "type": "object",
            "properties": {"tool": {"const": NO_CALL}},
            "required": ["tool"],
            "additionalProperties": False,
        }
    ]
    for name, parameters in tools:
        options.append(
            {
                "type": "object",
                "properties": {"tool": {"const": name}, "arguments": json.loads(parameters)},
                "required": ["tool", "arguments"],
                "additionalProperties": False,
            }
        )
    return {"anyOf": options}


def call_messages(
    tools: Sequence[common_pb2.ToolSpec], user_message: str, shots: Sequence[tuple[str, dict[str, Any]]]
) -> list[Message]:
    """The band's prompt: decide whether one of ``tools`` is needed and write its call, in one generation.

    ``shots`` are worked decisions, least to most similar: the candidates' examples as calls and requests
    no tool serves as ``{"tool": "none"}``.
    """
    lines = []
    for tool in tools:
        props = json.loads(tool.parameters_json_schema).get("properties", {})
        lines.append(f"- {tool.name}: {tool.description} Arguments: {', '.join(props)}.")
    system = (
        "Decide whether the user's message needs one of these tools, and if it does, write the call. Tools:\n"
        + "\n".join(lines)
        + '\nReply with JSON: {"tool": name, "arguments": {...}}, or {"tool": "none"} when no tool is needed '
        "(writing, greetings, opinions, general knowledge)."
    )
    messages: list[Message] = [Message("system", system)]
    for question, decision in shots:
        messages.append(Message("user", question))
        messages.append(Message("assistant", _compact(decision)))
    messages.append(Message("user", user_message))
    return messages


def request_messages(tool: common_pb2.ToolSpec) -> list[Message]:
    """The likelihood judge's prompt for ``tool``: after it, the user's message is scored as the model's answer.

    A noisy-channel reading (how likely is this request, written for this tool?) rather than the choice's (which
    tool for this request?): the 135M model ranks poorly alone but often knows a request when it sees one.
    """
    text = f"Tool: {name_words(tool.name)}. {tool.description.strip()}\nWrite a request a user would send to this tool."
    return [Message("user", text)]


def parse_call(text: str, candidates: Sequence[str]) -> tuple[str, dict[str, Any]] | None:
    """(tool, arguments) from the band's decision; None for "no call" and for unparseable output."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        log.warning("unparseable tool decision: %r", text[:200])
        return None
    if not isinstance(data, dict) or data.get("tool") not in candidates:
        return None
    arguments = data.get("arguments")
    return (data["tool"], arguments) if isinstance(arguments, dict) else None


def _compact(value: Any) -> str:
    """JSON as the grammar lets the model write it (no whitespace): examples in another layout pull the model
    off its own distribution at every separator (measured on the dev split: 18 → 19 of 24 exact fills)."""
    return json.dumps(value, separators=(",", ":"))


def worked_examples(tool: common_pb2.ToolSpec) -> list[tuple[str, dict[str, Any]]]:
    """The tool's examples that carry arguments, as (message, arguments)."""
    return [(e.text, json.loads(e.arguments_json)) for e in tool.examples if e.arguments_json]


def fill_messages(
    tool: common_pb2.ToolSpec,
    user_message: str,
    context: str = "",
    shots: Sequence[tuple[str, dict[str, Any]]] | None = None,
    language: Language = ENGLISH,
) -> list[Message]:
    """The fill prompt of ``tool`` for ``user_message``.

    ``context`` (e.g. the previous answer) is given when the message refers
    back. ``shots`` are the worked examples, least to most similar; by default
    the tool's examples ordered by word overlap.
    """
    schema = json.loads(tool.parameters_json_schema)
    params = "; ".join(
        f"{k} ({v.get('type', 'any')}{': ' + v['description'] if v.get('description') else ''})"
        for k, v in schema.get("properties", {}).items()
    )
    system = (
        f"Write the arguments of the {tool.name} tool ({tool.description}) for the user's message, as JSON. "
        f"Arguments: {params}."
    )
    if context:
        system += " When the message refers to an earlier result, use the number from the earlier conversation."
    if shots is None:
        shots = by_similarity(user_message, worked_examples(tool), language)[-FILL_EXAMPLES:]
    messages: list[Message] = [Message("system", system)]
    for question, args in shots:
        messages.append(Message("user", question))
        messages.append(Message("assistant", _compact(args)))
    message = f"Earlier: {context}\nNow: {user_message}" if context else user_message
    messages.append(Message("user", message))
    return messages


def parse_choice(text: str, candidates: Sequence[str]) -> list[str]:
    """Tool names from the choose step; unparseable output (e.g. cut off) chooses nothing."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        log.warning("unparseable tool choice: %r", text[:200])
        return []
    names = set(candidates)
    chosen = data.get("tools", []) if isinstance(data, dict) else []
    unique = list(dict.fromkeys(n for n in chosen if isinstance(n, str) and n in names))
    return unique[:MAX_CALLS_PER_ROUND]


def parse_arguments(text: str) -> dict[str, Any] | None:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        log.warning("unparseable tool arguments: %r", text[:200])
        return None
    return data if isinstance(data, dict) else None
