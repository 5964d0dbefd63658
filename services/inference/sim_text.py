"""What the simulated engine reads and writes: its tokenizer, chat rendering and output text.

Kept apart from the scheduler in ``simulator`` because it is the text model,
not the timing model. Tokens are whitespace-separated words (ids from a CRC);
output is a fixed, prompt-seeded sequence of words, or a minimal JSON instance
of the schema when structured output is asked for. Nothing is random: the same
request gives the same output on every replica.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from typing import Any

from services.inference.engine import GenerationRequest, PreparedRequest

WORDS = [
    "the",
    "mesh",
    "serves",
    "agents",
    "over",
    "streams",
    "and",
    "every",
    "token",
    "arrives",
    "in",
    "order",
    "while",
    "tools",
    "run",
    "in",
    "parallel",
    "so",
    "answers",
    "come",
    "fast",
    "with",
    "cached",
    "prefixes",
]


def tokenize(text: str) -> tuple[int, ...]:
    return tuple(zlib.crc32(word.encode()) % 50_000 for word in text.split())


def render_chat(request: GenerationRequest) -> str:
    if isinstance(request.prompt, str):
        return request.prompt
    lines = [f"<|{turn.role}|> {turn.content}" for turn in request.prompt]
    if request.add_generation_prompt and not request.continue_final_message:
        lines.append("<|assistant|>")
    return "\n".join(lines)


def minimal_instance(schema: Any) -> Any:
    """The smallest JSON value satisfying common schemas (objects with required fields, enums, arrays)."""
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return minimal_instance(schema[key][0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0]
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {name: minimal_instance(props.get(name, {})) for name in schema.get("required", [])}
    if kind == "array":
        count = int(schema.get("minItems", 0))
        return [minimal_instance(schema.get("items", {})) for _ in range(count)]
    if kind == "string":
        return "x" * int(schema.get("minLength", 0))
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    return None


def output_pieces(prepared: PreparedRequest, count: int) -> list[str]:
    """The output, one piece per simulated token: ``count`` seeded words, or the schema's minimal JSON."""
    request = prepared.request
    if request.json_schema:
        text = json.dumps(minimal_instance(json.loads(request.json_schema)), separators=(",", ":"))
        # One "token" per 4 characters keeps JSON streaming in pieces.
        return [text[i : i + 4] for i in range(0, len(text), 4)]
    seed = hashlib.sha256(repr(prepared.prompt_token_ids).encode()).digest()
    return [WORDS[seed[i % len(seed)] % len(WORDS)] + " " for i in range(count)]
