"""Tool cards: the texts that stand for each tool (and for "no tool") when a message is compared with them.

In: the tool list (``ToolSpec``: name, description, parameter schema, and —
only for tools that bring them — example requests and near misses) and the
tool-independent no-tool examples. Out: ``Cards`` — per tool its positive
texts, its near misses, whether it is *described only*, and the no-tool
examples that still hold once this tool list is loaded.

A tool from an MCP server or an OpenAI ``tools`` list brings a name, a
description and a schema, nothing else. Its card is then built from those:
the description, the name read as words ("create_ticket" → "create ticket"),
and the description together with what its parameters say ("… City name").
Such a tool is marked ``described``: a message is compared with descriptions,
not with questions, and similarities to a description run lower than to an
example request, so the similarity judge holds it to thresholds of its own
(``SelectorSettings.described_choose`` / ``described_reject``).

No-tool examples are judged against the tool list: "What is the population of
Tokyo?" needs no tool until a loaded tool looks it up. An example that is
nearer a tool's cards than that tool's own choose threshold, and shares one of
its intent words, is that tool's business and leaves the no-tool class
(``covered``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentmesh.common.v1 import common_pb2

#: How a tool name reads as words: split at underscores, dashes, dots and camel case ("getStockQuote").
_NAME_PARTS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def name_words(name: str) -> str:
    """``create_ticket`` → "create ticket"; ``calendar__listEvents`` → "calendar list events"."""
    return " ".join(p.lower() for p in _NAME_PARTS.findall(name))


def property_text(name: str, prop: dict[str, Any]) -> str:
    """A property's name read as words, then its description: what the language reads a property's kind from
    (whether it takes a time, a currency's code)."""
    return f"{name_words(name)} {prop.get('description', '')}"


def parameter_text(spec: common_pb2.ToolSpec) -> str:
    """The parameters' descriptions (or names, where a parameter has none), as one sentence."""
    try:
        props = json.loads(spec.parameters_json_schema or "{}").get("properties", {})
    except (json.JSONDecodeError, AttributeError):
        return ""
    if not isinstance(props, dict):
        return ""
    parts = []
    for key, prop in props.items():
        text = prop.get("description") if isinstance(prop, dict) else None
        parts.append(str(text).strip().rstrip(".") if text else name_words(key))
    return "; ".join(p for p in parts if p)


@dataclass(frozen=True)
class ToolCard:
    """One tool's texts: ``positives`` stand for its asks, ``negatives`` for its near misses."""

    name: str
    positives: tuple[str, ...]
    negatives: tuple[str, ...]
    #: No example requests: the card is built from the name, description and parameters alone.
    described: bool
    #: The texts the tool's intent words are learnt from (its examples, or the words of its card).
    intent_texts: tuple[str, ...]


def tool_card(spec: common_pb2.ToolSpec) -> ToolCard:
    """The card of one tool (``described`` when it brings no example)."""
    examples = tuple(e.text for e in spec.examples if e.text)
    negatives = tuple(n for n in spec.negative_examples if n)
    if examples:
        positives = tuple(t for t in (spec.description, *examples) if t)
        return ToolCard(spec.name, positives, negatives, described=False, intent_texts=examples)
    named = name_words(spec.name)
    params = parameter_text(spec)
    description = spec.description.strip()
    texts = [description, named, f"{named}: {description} ({params})" if params else f"{named}: {description}"]
    positives = tuple(dict.fromkeys(t for t in texts if t))
    return ToolCard(spec.name, positives, negatives, described=True, intent_texts=(named, description))


def tool_cards(specs: Sequence[common_pb2.ToolSpec]) -> list[ToolCard]:
    return [tool_card(s) for s in specs]
