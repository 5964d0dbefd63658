"""An OpenAI ``/v1/chat/completions`` body, validated into what AgentService needs (``ChatRequest``).

Invalid input raises ``InvalidArgument`` naming the field as OpenAI names it (``messages[2].content``,
``max_tokens``), which the edge answers as a 400 with ``param`` set. What the mesh cannot honour is
refused rather than ignored: ``n`` > 1, client-defined ``tools``/``functions``, ``logprobs``, a
``response_format`` other than text. ``presence_penalty`` and ``frequency_penalty`` ([-2, 2]) are
OpenAI's; ``repetition_penalty`` (> 0, 1: none) is an extra body field, as vLLM's server takes it.
Fields that only tune OpenAI's own models (``user``, ``logit_bias``...) are ignored, as vLLM's server
ignores what its engine lacks.

Conversation state: ``agentmesh-agent`` keeps the history in the mesh's session, so with an
``X-AgentMesh-Session`` header only the last (user) message is new and earlier ones are not re-read.
Without the header a request may carry system messages and one user message; a longer history is refused
(Complete has no history field, and silently flattening it would change the answer).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from agentmesh_client import Priority, Sampling
from services.runtime.errors import InvalidArgument

AGENT_MODEL = "agentmesh-agent"
ROLES = ("system", "developer", "user", "assistant", "tool")
PRIORITY_HEADER = "X-AgentMesh-Priority"
SESSION_HEADER = "X-AgentMesh-Session"


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion to run: on the agent (``agent``) or as a plain completion."""

    model: str
    message: str
    system_prompt: str
    sampling: Sampling
    stream: bool
    include_usage: bool
    priority: Priority
    session_id: str
    tools: str

    @property
    def agent(self) -> bool:
        return self.model == AGENT_MODEL


def parse_chat_request(body: Any, headers: dict[str, str]) -> ChatRequest:
    """Validate ``body`` (decoded JSON) and the mesh's headers (names lower-cased)."""
    if not isinstance(body, dict):
        raise InvalidArgument("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidArgument.field("model", "a model name is required")
    session_id = headers.get(SESSION_HEADER.lower(), "").strip()
    system, message = _messages(body.get("messages"), agent=model == AGENT_MODEL, continuing=bool(session_id))
    if session_id and model != AGENT_MODEL:
        raise InvalidArgument.field(SESSION_HEADER, f"sessions belong to model {AGENT_MODEL}")
    for name in ("tools", "functions"):
        if body.get(name):
            raise InvalidArgument.field(name, f"client-defined tools are not supported; {AGENT_MODEL} runs the mesh's")
    if body.get("n", 1) != 1:
        raise InvalidArgument.field("n", "only n=1 is supported")
    if body.get("logprobs"):
        raise InvalidArgument.field("logprobs", "logprobs are not supported")
    response_format = body.get("response_format")
    if response_format is not None and (not isinstance(response_format, dict) or response_format.get("type") != "text"):
        raise InvalidArgument.field("response_format", "only the text format is supported")
    stream = _typed(body, "stream", bool, False)
    options = body.get("stream_options")
    if options is not None and (not stream or not isinstance(options, dict)):
        raise InvalidArgument.field("stream_options", "an object, allowed only when stream is true")
    include_usage = _typed(options or {}, "include_usage", bool, False, field="stream_options.include_usage")
    priority = headers.get(PRIORITY_HEADER.lower(), "P1").strip().upper()
    if priority not in ("P0", "P1", "P2"):
        raise InvalidArgument.field(PRIORITY_HEADER, "P0, P1 or P2")
    return ChatRequest(
        model=model,
        message=message,
        system_prompt=system,
        sampling=_sampling(body),
        stream=stream,
        include_usage=include_usage,
        priority=priority,  # type: ignore[arg-type]  # checked against the three names just above
        session_id=session_id,
        tools=_tool_choice(body.get("tool_choice"), agent=model == AGENT_MODEL),
    )


def _messages(messages: Any, *, agent: bool, continuing: bool) -> tuple[str, str]:
    """(system prompt, the user's new message)."""
    if not isinstance(messages, list) or not messages:
        raise InvalidArgument.field("messages", "a non-empty array of messages is required")
    system: list[str] = []
    turns = 0
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise InvalidArgument.field(f"messages[{i}].role", f"one of {', '.join(ROLES)}")
        if m["role"] in ("system", "developer"):
            system.append(_text(m.get("content"), f"messages[{i}].content"))
        else:
            turns += 1
    last = messages[-1]
    if last["role"] != "user":
        raise InvalidArgument.field(f"messages[{len(messages) - 1}].role", "the last message must be the user's")
    if turns > 1 and not continuing:
        hint = f"send the {SESSION_HEADER} header from the previous answer" if agent else f"use {AGENT_MODEL}"
        raise InvalidArgument.field("messages", f"earlier turns are not replayed; {hint}")
    message = _text(last.get("content"), f"messages[{len(messages) - 1}].content")
    if not message.strip():
        raise InvalidArgument.field(f"messages[{len(messages) - 1}].content", "must not be empty")
    return "\n\n".join(system), message


def _text(content: Any, field: str) -> str:
    """A message's text: a string, or an array of text parts (other parts are refused)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise InvalidArgument.field(f"{field}[{j}]", "only text parts are supported")
            parts.append(part["text"])
        return "".join(parts)
    raise InvalidArgument.field(field, "a string or an array of text parts")


def _sampling(body: dict[str, Any]) -> Sampling:
    temperature = _number(body, "temperature", 0.0, 2.0)
    top_p = _number(body, "top_p", 0.0, 1.0)
    if top_p is not None and top_p == 0:
        raise InvalidArgument.field("top_p", "must be greater than 0")
    top_k = _integer(body, "top_k", 0)
    seed = _integer(body, "seed", 0)
    max_tokens = _integer(body, "max_completion_tokens", 1)
    if max_tokens is None:
        max_tokens = _integer(body, "max_tokens", 1)
    stop = body.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    if stop is not None and (not isinstance(stop, list) or len(stop) > 4 or not all(isinstance(s, str) for s in stop)):
        raise InvalidArgument.field("stop", "a string or an array of at most 4 strings")
    repetition_penalty = _number(body, "repetition_penalty", -math.inf, math.inf)
    if repetition_penalty is not None and repetition_penalty <= 0:
        raise InvalidArgument.field("repetition_penalty", "must be greater than 0 (1: no penalty)")
    return Sampling(
        temperature,
        top_p,
        top_k,
        max_tokens,
        seed,
        tuple(stop or ()),
        presence_penalty=_number(body, "presence_penalty", -2.0, 2.0),
        frequency_penalty=_number(body, "frequency_penalty", -2.0, 2.0),
        repetition_penalty=repetition_penalty,
    )


def _tool_choice(value: Any, *, agent: bool) -> str:
    if value is None:
        return "auto"
    if not agent:
        raise InvalidArgument.field("tool_choice", f"tools run only on model {AGENT_MODEL}")
    if value in ("auto", "none", "required"):
        return str(value)
    name = value.get("function", {}).get("name") if isinstance(value, dict) else None
    if not isinstance(name, str) or not name:
        raise InvalidArgument.field(
            "tool_choice", 'auto, none, required or {"type":"function","function":{"name":...}}'
        )
    return name


def _typed(body: dict[str, Any], name: str, kind: type, default: Any, *, field: str = "") -> Any:
    value = body.get(name, default)
    if value is None:
        return default
    if not isinstance(value, kind):
        raise InvalidArgument.field(field or name, f"must be a {kind.__name__}")
    return value


def _number(body: dict[str, Any], name: str, low: float, high: float) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidArgument.field(name, "must be a number")
    if not low <= value <= high:
        raise InvalidArgument.field(name, f"must be between {low:g} and {high:g}")
    return float(value)


def _integer(body: dict[str, Any], name: str, low: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidArgument.field(name, f"must be an integer of at least {low}")
    return value
