"""Inputs, the first stage of planning: the message, the conversation it continues, and follow-up rewriting.

In: the turn as the agent loop sees it (``PlanInput``: the message, the tool
choice, what the session says about the previous turn). Out: the message the
rest of the pipeline plans for, and the context a fill may need:

- a bare-number follow-up ("And 30?") becomes the previous ask with that
  number, standing alone (``restated``);
- a phrase that stands for the previous result ("add 6 to that result")
  becomes that number (``resolved``), and the message then stands alone;
- otherwise a message that refers back, or whose tool ran last turn, carries
  the previous turn as context for its fill (``context``).

What counts as "refers back" or "that result" is the language's
(``services.runtime.language``); nothing here names a tool.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from services.runtime.language import Language


@dataclass(frozen=True)
class PlanInput:
    """What planning needs to know about the turn."""

    message: str
    mode: str  # auto, required, named (never none: planning is skipped then)
    named_tool: str
    priority: common_pb2.Priority.ValueType
    previous_message: str = ""
    previous_answer: str = ""
    #: The previous turn's successful calls, (tool name, arguments): a follow-up's fill sees how its tool
    #: was called last time ("What about 7 kg?" keeps the unit asked for before).
    previous_calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    #: The previous turn's one numeric result (a tool output's ``result``), what "that result" means.
    previous_result: str = ""


@dataclass(frozen=True)
class PlannedCall:
    """One call planning decided: a tool and its (grounded) arguments."""

    name: str
    arguments: dict[str, Any]

    @property
    def arguments_json(self) -> str:
        return json.dumps(self.arguments, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Plan:
    """What planning hands the tool round: the calls, how they were selected, and which judge decided."""

    calls: list[PlannedCall]
    method: agent_pb2.ToolSelection.ValueType
    judge: str = ""


def restated(turn: PlanInput, language: Language) -> PlanInput:
    """A bare-number follow-up as the previous ask with that number in place of its one number, standing alone.

    "Convert 20 celsius to fahrenheit" then "And 30?": the ask is "Convert 30
    celsius to fahrenheit". Said whole, the judges see the ask (a bare "30"
    scores as arithmetic) and the fill copies "30 celsius" from it instead of
    composing it from the earlier turn. A previous ask with no number, or with
    several ("12*12" then "And 13?"), is not guessed at: the turn is planned as
    it came.
    """
    number = language.bare_number(turn.message)
    if number is None or not turn.previous_message:
        return turn
    message = language.with_number(turn.previous_message, number)
    if message is None:
        return turn
    return PlanInput(message, turn.mode, turn.named_tool, turn.priority)  # standing alone: no earlier turn


def context(turn: PlanInput, names: list[str] | tuple[str, ...], language: Language) -> str:
    """The previous turn, when the message refers back or uses a tool that turn used; else ""."""
    previous = {name for name, _ in turn.previous_calls}
    if (turn.previous_message or turn.previous_answer) and (
        language.refers_back(turn.message) or any(name in previous for name in names)
    ):
        # Both sides of the previous turn: "there" names a place the user said, "that" a number the answer
        # said; and a tool used again right after its last call is a follow-up of it ("What about 7 kg?").
        return " ".join(filter(None, (turn.previous_message, turn.previous_answer)))
    return ""


def resolved(text: str, turn: PlanInput, told: str, language: Language) -> tuple[str, str]:
    """``text`` with "that result" read as the previous result, and the context the fill still needs."""
    if turn.previous_result:
        said = language.with_previous_result(text, turn.previous_result)
        if said != text:  # "divide 200 by 8" says it all: the earlier turn would only be copied back
            return said, ""
    return text, told
