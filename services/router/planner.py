"""The plan step: ask the model which tools to call, as JSON constrained by a schema.

The schema is generated from the tool registry (``ListTools``): an object with
``tool_calls``, a list whose items are ``{"name": <one tool>, "arguments":
<that tool's argument schema>}``. Tool choice shapes it: ``none`` skips
planning, ``required`` sets ``minItems: 1``, a named tool leaves only that tool.
The prompt lists the tools and shows a few worked examples (built only for
tools that exist); it is the same text for every turn, so after the first plan
it is served from the replica's prefix cache.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentmesh.common.v1 import common_pb2
from services.router.prompt import Message

log = logging.getLogger(__name__)

MAX_CALLS_PER_ROUND = 4

#: Worked examples per tool: (user message, arguments). Only tools that exist are shown.
EXAMPLES: dict[str, tuple[str, dict[str, Any]]] = {
    "calculator": ("What is 12*9?", {"expression": "12*9"}),
    "clock": ("What time is it in Paris right now?", {"timezone": "Europe/Paris"}),
    "unit_convert": ("How many miles is 5 km?", {"value": 5, "from_unit": "km", "to_unit": "mi"}),
    "kb_search": ("How does AgentMesh pick an inference replica?", {"query": "pick inference replica"}),
}
NO_TOOL_EXAMPLES = ("Write a short poem about trees.", "Hello! How are you?")


@dataclass(frozen=True)
class PlannedCall:
    name: str
    arguments: dict[str, Any]

    @property
    def arguments_json(self) -> str:
        return json.dumps(self.arguments, sort_keys=True, separators=(",", ":"))


def plan_schema(tools: Sequence[common_pb2.ToolSpec], mode: str, named: str = "") -> dict[str, Any]:
    """JSON schema of a plan for these tools under a tool-choice mode (auto, required, named)."""
    chosen = [t for t in tools if not named or t.name == named]
    items = [
        {
            "type": "object",
            "properties": {"name": {"enum": [t.name]}, "arguments": json.loads(t.parameters_json_schema)},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for t in chosen
    ]
    calls: dict[str, Any] = {"type": "array", "items": {"anyOf": items}, "maxItems": MAX_CALLS_PER_ROUND}
    if mode in ("required", "named"):
        calls["minItems"] = 1
    return {
        "type": "object",
        "properties": {"tool_calls": calls},
        "required": ["tool_calls"],
        "additionalProperties": False,
    }


def _signature(spec: common_pb2.ToolSpec) -> str:
    schema = json.loads(spec.parameters_json_schema)
    params = ", ".join(f"{name}: {prop.get('type', 'any')}" for name, prop in schema.get("properties", {}).items())
    return f"- {spec.name}({params}): {spec.description}"


def plan_messages(
    tools: Sequence[common_pb2.ToolSpec],
    user_message: str,
    previous_results: Message | None = None,
) -> list[Message]:
    """The planner's prompt: fixed instructions and examples, then the user's message."""
    names = {t.name for t in tools}
    system = (
        "You decide which tools to call to answer the user's latest message. Tools:\n"
        + "\n".join(_signature(t) for t in tools)
        + '\nReply with JSON only: {"tool_calls": [{"name": ..., "arguments": {...}}]}. '
        "Call a tool only when it is needed: arithmetic goes to calculator, the current time to clock, "
        "unit conversions to unit_convert. Use an empty list for writing, greetings, opinions and general "
        "knowledge."
    )
    messages: list[Message] = [("system", system)]
    for name, (question, args) in EXAMPLES.items():
        if name in names:
            messages.append(("user", question))
            messages.append(("assistant", json.dumps({"tool_calls": [{"name": name, "arguments": args}]})))
    for question in NO_TOOL_EXAMPLES:
        messages.append(("user", question))
        messages.append(("assistant", json.dumps({"tool_calls": []})))
    messages.append(("user", user_message))
    if previous_results is not None:
        messages.append(
            (
                "system",
                previous_results[1] + "\nIf these results answer the message, reply with an empty list.",
            )
        )
    return messages


def parse_plan(text: str, tools: Sequence[common_pb2.ToolSpec]) -> list[PlannedCall]:
    """The calls in a plan; a plan that is not valid JSON (e.g. cut off) plans nothing."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        log.warning("unparseable plan: %r", text[:200])
        return []
    names = {t.name for t in tools}
    calls = []
    for item in data.get("tool_calls", []) if isinstance(data, dict) else []:
        if isinstance(item, dict) and item.get("name") in names and isinstance(item.get("arguments"), dict):
            calls.append(PlannedCall(item["name"], item["arguments"]))
    return calls[:MAX_CALLS_PER_ROUND]
