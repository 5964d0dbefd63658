"""What a session holds: turn records, their schema-v1 events, and the fold that rebuilds turns from events.

In: the events of a session's Redis stream (``store.py`` reads them), or
one archived turn's JSON. Out: ``TurnRecord`` objects, oldest first. A turn's
events are always appended together, so folding a stream that starts at any
turn boundary yields whole turns; the archive keeps one folded record per turn
(``TurnRecord.to_json``), which carries exactly what the turn's events did.
Event types (schema v1): ``user_message``, ``plan``, ``tool_call``,
``tool_result``, ``answer``, ``usage``, ``turn_completed``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from agentmesh.common.v1 import common_pb2

SCHEMA_VERSION = 1


@dataclass
class ToolRecord:
    call_id: str
    tool_name: str
    arguments_json: str
    status: int = 0
    output_json: str = ""
    error_message: str = ""
    latency_s: float = 0.0
    cached: bool = False
    #: A call of one of the turn's client tools (the client ran it, or was handed it).
    client_side: bool = False
    #: The executor's machine-readable cause of a failure (ToolResult.error_reason).
    error_reason: str = ""


@dataclass
class TurnRecord:
    turn_id: str
    user_message: str
    answer: str = ""
    tool_calls: list[ToolRecord] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    finish_reason: int = 0
    completed_at: float = 0.0

    def successful_calls(self) -> tuple[tuple[str, dict[str, Any]], ...]:
        """The calls that succeeded, as (tool name, arguments): how a follow-up's tool was called last time."""
        return tuple((name, args) for name, args in self._ok_objects("arguments_json"))

    def single_result(self) -> str:
        """The number the turn's one successful call returned as its ``result`` (an arithmetic or a conversion tool's);
        "" when none or several did, since which one "that result" means is then not ours to guess."""
        found = [
            out["result"]
            for _, out in self._ok_objects("output_json")
            if isinstance(out.get("result"), (int, float)) and not isinstance(out.get("result"), bool)
        ]
        if len(found) != 1:
            return ""
        return str(found[0]) if isinstance(found[0], int) else format(found[0], ".12g")

    def _ok_objects(self, attribute: str) -> list[tuple[str, dict[str, Any]]]:
        """(tool name, the JSON object in ``attribute``) of each successful call whose field holds one."""
        out = []
        for call in self.tool_calls:
            if call.status != common_pb2.TOOL_CALL_STATUS_OK:
                continue
            try:
                value = json.loads(getattr(call, attribute))
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                out.append((call.tool_name, value))
        return out

    def events(self) -> list[dict[str, Any]]:
        """This turn as schema-v1 events, in order."""
        out: list[dict[str, Any]] = [{"type": "user_message", "turn_id": self.turn_id, "text": self.user_message}]
        if self.tool_calls:
            out.append(
                {
                    "type": "plan",
                    "turn_id": self.turn_id,
                    "tool_calls": [[t.tool_name, t.arguments_json] for t in self.tool_calls],
                }
            )
        for t in self.tool_calls:
            call: dict[str, Any] = {
                "type": "tool_call",
                "turn_id": self.turn_id,
                "call_id": t.call_id,
                "name": t.tool_name,
                "arguments": t.arguments_json,
            }
            if t.client_side:
                call["client"] = True
            out.append(call)
            result: dict[str, Any] = {
                "type": "tool_result",
                "turn_id": self.turn_id,
                "call_id": t.call_id,
                "status": t.status,
                "output": t.output_json,
                "error": t.error_message,
                "latency_s": t.latency_s,
                "cached": t.cached,
            }
            if t.error_reason:
                result["reason"] = t.error_reason
            out.append(result)
        out.append({"type": "answer", "turn_id": self.turn_id, "text": self.answer})
        out.append({"type": "usage", "turn_id": self.turn_id, **self.usage, "finish_reason": self.finish_reason})
        out.append({"type": "turn_completed", "turn_id": self.turn_id, "at": self.completed_at})
        return out

    def to_json(self) -> str:
        """The folded turn, as one archive entry stores it."""
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> TurnRecord:
        data = json.loads(text)
        calls = [ToolRecord(**c) for c in data.pop("tool_calls", [])]
        return cls(**data, tool_calls=calls)


def fold(events: list[dict[str, Any]]) -> list[TurnRecord]:
    """The completed turns of ``events``, oldest first; events of a newer schema are skipped by the caller."""
    turns: dict[str, TurnRecord] = {}
    calls: dict[tuple[str, str], ToolRecord] = {}
    for e in events:
        tid = e.get("turn_id", "")
        kind = e.get("type")
        if kind == "user_message":
            turns[tid] = TurnRecord(turn_id=tid, user_message=e["text"])
            continue
        turn = turns.get(tid)
        if turn is None:
            continue
        if kind == "tool_call":
            record = ToolRecord(e["call_id"], e["name"], e["arguments"], client_side=bool(e.get("client", False)))
            calls[(tid, e["call_id"])] = record
            turn.tool_calls.append(record)
        elif kind == "tool_result" and (tid, e["call_id"]) in calls:
            record = calls[(tid, e["call_id"])]
            record.status, record.output_json, record.error_message = e["status"], e["output"], e["error"]
            record.latency_s, record.cached = e["latency_s"], e["cached"]
            record.error_reason = str(e.get("reason", ""))
        elif kind == "answer":
            turn.answer = e["text"]
        elif kind == "usage":
            turn.usage = {k: int(e.get(k, 0)) for k in ("prompt_tokens", "completion_tokens", "cached_prompt_tokens")}
            turn.finish_reason = int(e.get("finish_reason", 0))
        elif kind == "turn_completed":
            turn.completed_at = float(e.get("at", 0.0))
    return [t for t in turns.values() if t.completed_at]
