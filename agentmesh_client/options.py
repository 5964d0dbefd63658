"""What a caller may ask of a turn or completion, in plain Python, and its proto form (converted only here)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2

Priority = Literal["P0", "P1", "P2"]

PRIORITIES: dict[str, common_pb2.Priority.ValueType] = {
    "P0": common_pb2.PRIORITY_P0,
    "P1": common_pb2.PRIORITY_P1,
    "P2": common_pb2.PRIORITY_P2,
}
TOOL_CHOICE_MODES: dict[str, agent_pb2.ToolChoiceMode.ValueType] = {
    "auto": agent_pb2.TOOL_CHOICE_MODE_AUTO,
    "none": agent_pb2.TOOL_CHOICE_MODE_NONE,
    "required": agent_pb2.TOOL_CHOICE_MODE_REQUIRED,
}


@dataclass(frozen=True)
class Sampling:
    """Sampling of an answer; None leaves the server's default (temperature 0: deterministic and cacheable)."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_tokens: int | None = None
    seed: int | None = None
    stop: Sequence[str] = field(default_factory=tuple)
    #: OpenAI's penalties, in [-2, 2], and vLLM's ``repetition_penalty`` (> 0, 1: none); None: the server's.
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None

    def to_proto(self) -> common_pb2.SamplingParams:
        out = common_pb2.SamplingParams(stop=list(self.stop))
        if self.temperature is not None:
            out.temperature = self.temperature
        if self.top_p is not None:
            out.top_p = self.top_p
        if self.top_k is not None:
            out.top_k = self.top_k
        if self.max_tokens is not None:
            out.max_tokens = self.max_tokens
        if self.seed is not None:
            out.seed = self.seed
        if self.presence_penalty is not None:
            out.presence_penalty = self.presence_penalty
        if self.frequency_penalty is not None:
            out.frequency_penalty = self.frequency_penalty
        if self.repetition_penalty is not None:
            out.repetition_penalty = self.repetition_penalty
        return out


def tool_choice(value: str) -> agent_pb2.ToolChoice:
    """``auto``, ``none``, ``required``, or the name of the one tool to call."""
    if value in TOOL_CHOICE_MODES:
        return agent_pb2.ToolChoice(mode=TOOL_CHOICE_MODES[value])
    return agent_pb2.ToolChoice(mode=agent_pb2.TOOL_CHOICE_MODE_NAMED, tool_name=value)
