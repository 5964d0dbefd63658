"""OpenAI chat-completion bodies and stream chunks built from the typed client's events.

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

from agentmesh_client import ToolCallFinished, ToolCallProgress, ToolCallStarted, Usage

FINISH_REASONS = {"stop": "stop", "length": "length"}


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

    @property
    def id(self) -> str:
        return f"chatcmpl-{self.request_id}"

    def _extra(self) -> dict[str, Any]:
        if not self.session_id:
            return {}
        return {"agentmesh": {"session_id": self.session_id, "turn_id": self.turn_id, "tool_calls": self.tools}}

    def completion(self, finish_reason: str, usage: Usage) -> dict[str, Any]:
        """The whole (non-streamed) chat.completion."""
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "".join(self.text)},
                    "finish_reason": FINISH_REASONS.get(finish_reason, "stop"),
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
            reason = FINISH_REASONS.get(finish_reason, "stop") if finish_reason else None
            body["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": reason, "logprobs": None}]
        if usage is not None:
            body["usage"] = usage_body(usage)
        if tool is not None:
            body["agentmesh"] = {"session_id": self.session_id, "turn_id": self.turn_id, "tool_call": tool}
        return sse(body)


def sse(body: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"
