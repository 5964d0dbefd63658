"""What one turn of a case did, as the eval saw it on the stream: tool calls, answer, timings."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from evals.cases import TurnSpec

# -------------------------------------------------------------------------------------------- records


@dataclass
class ToolCall:
    """One tool call of a turn, from its ToolCallStarted and ToolCallFinished events."""

    call_id: str
    name: str
    arguments_json: str
    status: str = ""
    output_json: str = ""
    error_message: str = ""

    def arguments(self) -> dict[str, Any] | None:
        try:
            value = json.loads(self.arguments_json)
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None

    def output(self) -> dict[str, Any] | None:
        if self.status != "OK" or not self.output_json:
            return None
        try:
            value = json.loads(self.output_json)
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None


@dataclass
class TurnRecord:
    """What one turn of one case did under one mode, as the client saw it."""

    case_id: str
    category: str
    split: str
    mode: str
    turn_index: int
    expected: TurnSpec
    session_id: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    answer: str = ""
    generations: int = 0
    tool_selection: str = "unspecified"
    cached: bool = False
    ttft_client_s: float | None = None
    ttft_server_s: float | None = None
    latency_s: float | None = None
    planning_s: float | None = None
    error: str = ""

    @property
    def message(self) -> str:
        return self.expected.message

    @property
    def tools_called(self) -> frozenset[str]:
        return frozenset(c.name for c in self.calls)
