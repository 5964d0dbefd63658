"""A response being answered: the typed client's turn events → output items, and the semantic stream events.

In: ``TextDelta``, ``ToolCallStarted``/``ToolCallFinished`` of the mesh's tools, ``ClientToolCalls`` and the
``TurnCompleted``. Out: the response object (``snapshot``) and, per event, the SSE events a streaming caller
gets, each with the next ``sequence_number``. A whole (non-streamed) answer feeds the same ``Answer`` and
drops the events, so both forms hold the same items.

- Answer text is a ``message`` item with one ``output_text`` part: ``response.output_item.added``,
  ``response.content_part.added``, ``response.output_text.delta``..., and when the message ends
  ``response.output_text.done``, ``response.content_part.done``, ``response.output_item.done``.
- A client tool call is a ``function_call`` item (``call_id``, ``name``, ``arguments``):
  ``output_item.added`` (arguments empty), ``response.function_call_arguments.delta`` and ``.done``,
  ``output_item.done``.
- A tool the mesh ran (built-in or MCP) is an ``mcp_call`` item, the API's item for a tool the server calls:
  ``server_label`` is the MCP server's prefix (``calendar`` of ``calendar__create_event``) or ``agentmesh``
  for the built-ins. ``output_item.added``, ``response.mcp_call.in_progress``,
  ``response.mcp_call_arguments.delta``/``.done``, then at its finish ``response.mcp_call.completed`` (or
  ``.failed``) and ``output_item.done`` with ``output`` or ``error``.
- The end: ``response.completed``; ``response.incomplete`` with ``incomplete_details.reason``
  ``max_output_tokens`` for a length finish; ``response.failed`` with ``error`` for a failed or aborted turn.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from agentmesh_client import ClientToolCall, ToolCallFinished, ToolCallStarted, Usage

BUILTIN_LABEL = "agentmesh"
MCP_SEPARATOR = "__"


def usage_body(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_prompt_tokens},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.total_tokens,
    }


def sse_event(body: dict[str, Any]) -> bytes:
    data = json.dumps(body, separators=(",", ":"))
    return f"event: {body['type']}\ndata: {data}\n\n".encode()


@dataclass
class Answer:
    """One response's output as it grows, and its stream's events (see module docstring)."""

    response: dict[str, Any]
    sequence: int = 0
    output: list[dict[str, Any]] = field(default_factory=list)
    _message: int = -1  # index in ``output`` of the open message item
    _mesh_calls: dict[str, int] = field(default_factory=dict)  # call id → index of its mcp_call item

    def _event(self, kind: str, **fields: Any) -> bytes:
        body = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return sse_event(body)

    def snapshot(self) -> dict[str, Any]:
        return {**self.response, "output": [dict(item) for item in self.output]}

    def begin(self) -> list[bytes]:
        return [
            self._event("response.created", response=self.snapshot()),
            self._event("response.in_progress", response=self.snapshot()),
        ]

    def text(self, delta: str) -> list[bytes]:
        out: list[bytes] = []
        if self._message < 0:
            self._message = len(self.output)
            item_id = f"msg_{self.response['id'].removeprefix('resp_')}_{self._message}"
            added: dict[str, Any] = {
                "type": "message",
                "id": item_id,
                "status": "in_progress",
                "role": "assistant",
                "content": [],
            }
            self.output.append(added)
            out.append(self._event("response.output_item.added", output_index=self._message, item=dict(added)))
            part: dict[str, Any] = {"type": "output_text", "text": "", "annotations": []}
            out.append(
                self._event(
                    "response.content_part.added",
                    item_id=item_id,
                    output_index=self._message,
                    content_index=0,
                    part=part,
                )
            )
            added["content"] = [{**part, "logprobs": []}]
        item = self.output[self._message]
        item["content"][0]["text"] += delta
        out.append(
            self._event(
                "response.output_text.delta",
                item_id=item["id"],
                output_index=self._message,
                content_index=0,
                delta=delta,
                logprobs=[],
            )
        )
        return out

    def _close_message(self) -> list[bytes]:
        if self._message < 0:
            return []
        index, self._message = self._message, -1
        item = self.output[index]
        item["status"] = "completed"
        part = item["content"][0]
        return [
            self._event(
                "response.output_text.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                text=part["text"],
                logprobs=[],
            ),
            self._event(
                "response.content_part.done", item_id=item["id"], output_index=index, content_index=0, part=part
            ),
            self._event("response.output_item.done", output_index=index, item=dict(item)),
        ]

    def client_calls(self, calls: tuple[ClientToolCall, ...]) -> list[bytes]:
        out = self._close_message()
        for call in calls:
            index = len(self.output)
            item = {
                "type": "function_call",
                "id": f"fc_{call.call_id}",
                "call_id": call.call_id,
                "name": call.tool_name,
                "arguments": "",
                "status": "in_progress",
            }
            self.output.append(item)
            out.append(self._event("response.output_item.added", output_index=index, item=dict(item)))
            out.append(
                self._event(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=index,
                    delta=call.arguments_json,
                )
            )
            item |= {"arguments": call.arguments_json, "status": "completed"}
            out.append(
                self._event(
                    "response.function_call_arguments.done",
                    item_id=item["id"],
                    output_index=index,
                    name=call.tool_name,
                    arguments=call.arguments_json,
                )
            )
            out.append(self._event("response.output_item.done", output_index=index, item=dict(item)))
        return out

    def mesh_call_started(self, event: ToolCallStarted) -> list[bytes]:
        out = self._close_message()
        label, _, name = event.tool_name.rpartition(MCP_SEPARATOR)
        index = len(self.output)
        self._mesh_calls[event.call_id] = index
        item = {
            "type": "mcp_call",
            "id": f"mcp_{event.call_id}",
            "server_label": label or BUILTIN_LABEL,
            "name": name,
            "arguments": event.arguments_json,
            "output": None,
            "error": None,
            "status": "in_progress",
        }
        self.output.append(item)
        item_id = item["id"]
        out.append(self._event("response.output_item.added", output_index=index, item=dict(item)))
        out.append(self._event("response.mcp_call.in_progress", item_id=item_id, output_index=index))
        out.append(
            self._event(
                "response.mcp_call_arguments.delta", item_id=item_id, output_index=index, delta=event.arguments_json
            )
        )
        out.append(
            self._event(
                "response.mcp_call_arguments.done", item_id=item_id, output_index=index, arguments=event.arguments_json
            )
        )
        return out

    def mesh_call_finished(self, event: ToolCallFinished) -> list[bytes]:
        index = self._mesh_calls.pop(event.call_id, -1)
        if index < 0:
            return []
        item = self.output[index]
        ok = event.status == "ok"
        item |= {
            "output": event.output_json if ok else None,
            "error": None if ok else (event.error_message or event.status),
            "status": "completed" if ok else "failed",
        }
        kind = "response.mcp_call.completed" if ok else "response.mcp_call.failed"
        return [
            self._event(kind, item_id=item["id"], output_index=index),
            self._event("response.output_item.done", output_index=index, item=dict(item)),
        ]

    def finish(self, finish_reason: str, usage: Usage, error: dict[str, Any] | None = None) -> list[bytes]:
        """The last events: the open message closed, then completed, incomplete or failed."""
        out = self._close_message()
        self.response["usage"] = usage_body(usage)
        self.response["completed_at"] = int(time.time())
        if error is not None or finish_reason in ("error", "aborted"):
            self.response["status"] = "failed"
            self.response["error"] = error or {"code": "server_error", "message": "the turn was aborted"}
            kind = "response.failed"
        elif finish_reason == "length":
            self.response["status"] = "incomplete"
            self.response["incomplete_details"] = {"reason": "max_output_tokens"}
            kind = "response.incomplete"
        else:
            self.response["status"] = "completed"
            kind = "response.completed"
        out.append(self._event(kind, response=self.snapshot()))
        return out

    def fail(self, error: dict[str, Any]) -> list[bytes]:
        """A failure after the stream began (the mesh went away mid-turn)."""
        return self.finish("error", Usage(), error)
