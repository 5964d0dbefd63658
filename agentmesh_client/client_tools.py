"""Tools the client runs itself: how they are declared to a turn and how their results go back.

A turn given ``client_tools`` may plan calls of them; the server then sends ``ClientToolCalls`` and waits for
``SubmitToolResults`` on the same stream. A caller answers either explicitly (``Turn.submit_tool_results``) or
by giving the turn a ``ToolHandler``: each call is run by it as the event arrives (the calls of one round
concurrently), its return value is the output and an exception it raises is the call's error, which the model
reads. ``client_tool`` builds the declaration from a name, a description and a JSON Schema object.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from agentmesh_client.events import ClientToolCall


@dataclass(frozen=True)
class ClientToolResult:
    """What one client tool call returned (``output``), or why it failed (``error``, non-empty)."""

    call_id: str
    output: str = ""
    error: str = ""

    def to_proto(self) -> agent_pb2.ClientToolResult:
        return agent_pb2.ClientToolResult(call_id=self.call_id, output=self.output, error_message=self.error)


#: Runs one call; returns its output (a str as it is, anything else as JSON).
ToolHandler = Callable[[ClientToolCall], Awaitable[Any]]


def client_tool(name: str, description: str, parameters: Mapping[str, Any]) -> common_pb2.ToolSpec:
    """A client tool's declaration (``parameters``: the JSON Schema object of its arguments)."""
    return common_pb2.ToolSpec(name=name, description=description, parameters_json_schema=json.dumps(parameters))


async def run_calls(handler: ToolHandler, calls: Sequence[ClientToolCall]) -> list[ClientToolResult]:
    """Every call through ``handler`` at once; a handler's exception becomes that call's error."""

    async def one(call: ClientToolCall) -> ClientToolResult:
        try:
            output = await handler(call)
        except Exception as exc:  # the tool's failure is the model's to read, not the turn's
            return ClientToolResult(call.call_id, error=str(exc) or type(exc).__name__)
        return ClientToolResult(call.call_id, output if isinstance(output, str) else json.dumps(output))

    return list(await asyncio.gather(*(one(c) for c in calls)))
