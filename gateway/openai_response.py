"""OpenAI chat-completion bodies and stream chunks built from the typed client's events.

Client tool calls (``ClientToolCalls``: the turn ended at calls of the request's own ``tools``) are OpenAI's
``tool_calls``, as OpenAI writes them: in a whole completion ``message.tool_calls`` (``id``, ``type``
function, ``function.name`` and ``function.arguments``, a JSON string), ``content`` null unless there was
text, ``finish_reason`` ``tool_calls``; in a stream, per call, a delta with its ``index``, ``id``, ``type``
and ``function.name`` (arguments empty) and then one with its arguments — the first delta of the message
also carries ``role`` (and ``content`` null when the message begins with a call) — and a last chunk with
``finish_reason`` ``tool_calls``. Indices count calls across the message, from 0.

The agent's tool calls ride in an ``agentmesh`` field that OpenAI clients ignore and keep (the Python
SDK exposes it as ``model_extra["agentmesh"]``): in a stream, a chunk with no choices and
``{"agentmesh": {"tool_call": {...}}}`` per tool event (``phase`` started, progress — as a running tool
reports it — and finished); in a whole completion, ``{"agentmesh": {"session_id", "turn_id", "tool_calls":
[...]}}`` (started and finished: progress is for streams). They are not OpenAI ``tool_calls``:
those ask the client to run a tool, while these report tools the mesh already ran.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from agentmesh_client import ClientToolCall, ToolCallFinished, ToolCallProgress, ToolCallStarted, Usage

FINISH_REASONS = {"stop": "stop", "length": "length", "tool_calls": "tool_calls"}


def tool_event(event: ToolCallStarted | ToolCallProgress | ToolCallFinished) -> dict[str, Any]:
    """One tool event as reported to HTTP callers (``phase`` started, progress…, then finished)."""
    if isinstance(event, ToolCallProgress):
        return {
            "phase": "progress",
            "id": event.call_id,
            "name": event.tool_name,
            "progress": event.progress,
            "total": event.total,
            "message": event.message,
        }
    if isinstance(event, ToolCallStarted):
        return {
            "phase": "started",
            "id": event.call_id,
            "name": event.tool_name,
            "arguments": event.arguments_json,
            "round": event.round,
        }
    return {
        "phase": "finished",
        "id": event.call_id,
        "name": event.tool_name,
        "status": event.status,
        "output": event.output_json,
        "error": event.error_message,
        "latency_ms": round(event.latency_s * 1000, 3),
        "cached": event.cached,
    }


def tool_call_body(call: ClientToolCall) -> dict[str, Any]:
    """One client call as a whole completion's ``message.tool_calls`` holds it."""
    return {
        "id": call.call_id,
        "type": "function",
        "function": {"name": call.tool_name, "arguments": call.arguments_json},
    }


def tool_call_deltas(index: int, call: ClientToolCall) -> list[dict[str, Any]]:
    """One client call as a stream gives it: the call's identity and name first, then its arguments."""
    first = {
        "index": index,
        "id": call.call_id,
        "type": "function",
        "function": {"name": call.tool_name, "arguments": ""},
    }
    return [first, {"index": index, "function": {"arguments": call.arguments_json}}]


def usage_body(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_prompt_tokens},
    }


@dataclass
class Reply:
    """One chat completion being answered: its identity, and what a non-streamed body gathers."""

    model: str
    request_id: str
    session_id: str = ""
    turn_id: str = ""
    created: int = field(default_factory=lambda: int(time.time()))
    text: list[str] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    calls: list[ClientToolCall] = field(default_factory=list)
    #: Whether a stream has sent the message's first delta (the one with ``role``).
    began: bool = False

    @property
    def id(self) -> str:
        return f"chatcmpl-{self.request_id}"

    def _extra(self) -> dict[str, Any]:
        if not self.session_id:
            return {}
        return {"agentmesh": {"session_id": self.session_id, "turn_id": self.turn_id, "tool_calls": self.tools}}

    def completion(self, finish_reason: str, usage: Usage) -> dict[str, Any]:
        """The whole (non-streamed) chat.completion."""
        text = "".join(self.text)
        message: dict[str, Any] = {"role": "assistant", "content": text if text or not self.calls else None}
        if self.calls:
            message["tool_calls"] = [tool_call_body(c) for c in self.calls]
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": self.finish_reason(finish_reason),
                    "logprobs": None,
                }
            ],
            "usage": usage_body(usage),
            **self._extra(),
        }

    def chunk(
        self,
        delta: dict[str, Any] | None = None,
        *,
        finish_reason: str | None = None,
        usage: Usage | None = None,
        tool: dict[str, Any] | None = None,
    ) -> bytes:
        """One SSE event: a content delta, the finish, the usage (no choices), or a tool event (no choices)."""
        body: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [],
        }
        if delta is not None or finish_reason is not None:
            reason = self.finish_reason(finish_reason) if finish_reason else None
            body["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": reason, "logprobs": None}]
        if usage is not None:
            body["usage"] = usage_body(usage)
        if tool is not None:
            body["agentmesh"] = {"session_id": self.session_id, "turn_id": self.turn_id, "tool_call": tool}
        return sse(body)

    def finish_reason(self, reason: str) -> str:
        """OpenAI's finish reason for the mesh's: ``tool_calls`` exactly when the message has calls."""
        if self.calls:
            return "tool_calls"
        return FINISH_REASONS.get(reason, "stop") if reason != "tool_calls" else "stop"

    def text_chunks(self, text: str) -> list[bytes]:
        """A stream's chunks for more answer text (the message's first delta before it, if not sent yet)."""
        first = [] if self.began else [self.chunk({"role": "assistant", "content": ""})]
        self.began = True
        return [*first, self.chunk({"content": text})]

    def call_chunks(self, calls: tuple[ClientToolCall, ...]) -> list[bytes]:
        """A stream's chunks for client calls, indexed after the message's earlier ones."""
        out = []
        for call in calls:
            for part in tool_call_deltas(len(self.calls), call):
                delta: dict[str, Any] = {"tool_calls": [part]}
                if not self.began:
                    delta = {"role": "assistant", "content": None, **delta}
                    self.began = True
                out.append(self.chunk(delta))
            self.calls.append(call)
        return out

    def finish_chunks(self, reason: str) -> list[bytes]:
        """A stream's last choice chunk (after an empty first delta if the message had none)."""
        first = [] if self.began else [self.chunk({"role": "assistant", "content": ""})]
        self.began = True
        return [*first, self.chunk(finish_reason=reason)]


def sse(body: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"
