"""The judge chain: which tools a message needs, decided by an ordered list of judges with one interface.

Every judge is an object with ``name`` and ``judge(ask, verdict)``: it reads
the message (``Ask``) and the verdict so far, and returns a new verdict or
``None`` to pass. The chain starts from "undecided among every tool" and runs
each judge in order; what is still undecided after the last judge needs no
tool. The order comes from config (``PlanningSettings.judges``), and a
selection mode is only a chain:

- ``embedding``: ``similarity`` (thresholds on the card scores plus the
  intent-word check: decides most messages with no generation) →
  ``schema`` (what the tools' own schemas prove: a tool the message cannot
  fill is dropped; an ask whose shape is one tool's, or that names exactly
  the values a tool copies, is decided) → ``classifier`` (the card
  classifier's confident verdict on the band) → ``whether`` (a tool described
  only is not chosen, nor left to the band first, for a message the ask
  classifier reads as asking nothing a tool does) → ``likelihood`` (decides
  nothing: reorders the band's first candidates by how likely the model finds
  the message as a request written for each) → ``llm`` (one constrained
  generation decides what is left, and writes the call).
- ``llm``: ``llm`` alone, over every tool.

A verdict that is decided (tools, or no tool) is left alone by the band's
judges; ``schema`` may overrule a decided tool, because a tool whose
required copied argument has no span in the message cannot be its ask, and
``whether`` a decided tool described only, because a message that asks for
nothing needs no tool however near it comes to a description.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from agentmesh.common.v1 import common_pb2
from services.router.planning.candidates import CardIndex, TextScore
from services.router.planning.inputs import PlanInput, PlannedCall
from services.router.turn.progress import TurnCounters


class Decision(Enum):
    TOOLS = "tools"
    NONE = "none"
    AMBIGUOUS = "ambiguous"


@dataclass(frozen=True)
class Verdict:
    """What the chain has decided about one message so far."""

    decision: Decision
    #: Chosen tools (decision TOOLS), best first.
    tools: tuple[str, ...] = ()
    #: Tools still in question (decision AMBIGUOUS), best first.
    candidates: tuple[str, ...] = ()
    #: Per chosen tool, the part of the message that asked for it.
    segments: dict[str, str] = field(default_factory=dict)
    #: With decision TOOLS: other clauses of the message not yet decided, each with its candidate tools (a
    #: second ask must not be dropped silently).
    undecided: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: Best similarity per tool over the texts scored, and the best tool's "not this tool" score (traces).
    scores: dict[str, float] = field(default_factory=dict)
    none_score: float = 0.0
    #: The card classifier's verdict on the whole message: a tool's name, or "" for no tool, and its probability.
    judged: tuple[str, float] = ("", 0.0)
    #: Calls a judge wrote while deciding (the band's one-generation decision): planned as they are, no fill.
    calls: tuple[PlannedCall, ...] | None = None
    #: The judge whose verdict this is ("" for the chain's starting point).
    by: str = ""

    @property
    def settled(self) -> bool:
        """Decided, with no clause left undecided: the band's judges have nothing to do."""
        return self.decision is not Decision.AMBIGUOUS and not self.undecided


@dataclass(frozen=True)
class Ask:
    """What every judge reads: the turn (its message restated), the tools, and the message's card scores."""

    turn: PlanInput
    specs: Sequence[common_pb2.ToolSpec]
    counters: TurnCounters
    #: The cards, when the chain embeds messages (a similarity judge runs); None in an LLM-only chain.
    index: CardIndex | None = None
    #: The message's texts scored against the cards: the message, then its clauses, then the follow-up text.
    scored: tuple[TextScore, ...] = ()
    clauses: tuple[str, ...] = ()
    follow_up: str = ""

    @property
    def message(self) -> str:
        return self.turn.message

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.specs]

    def schema(self, name: str) -> str | None:
        for spec in self.specs:
            if spec.name == name:
                return spec.parameters_json_schema
        return None


class Judge(Protocol):
    """One judge of the chain: a new verdict, or None to pass."""

    name: str

    async def judge(self, ask: Ask, verdict: Verdict) -> Verdict | None: ...


def start(ask: Ask) -> Verdict:
    """The chain's starting point: undecided among every tool."""
    return Verdict(Decision.AMBIGUOUS, candidates=tuple(ask.names))


async def advance(judges: Sequence[Judge], ask: Ask, verdict: Verdict) -> Verdict:
    """Each judge in order on the verdict so far (a judge that passes leaves it as it is)."""
    for judge in judges:
        ruled = await judge.judge(ask, verdict)
        if ruled is not None:
            verdict = ruled
    return verdict


def conclude(verdict: Verdict) -> Verdict:
    """The chain's last word: what is still undecided needs no tool."""
    if verdict.decision is Decision.AMBIGUOUS:
        return Verdict(Decision.NONE, scores=verdict.scores, none_score=verdict.none_score, by=verdict.by)
    return verdict


async def run_chain(judges: Sequence[Judge], ask: Ask) -> Verdict:
    """The whole chain from its starting point to its conclusion."""
    return conclude(await advance(judges, ask, start(ask)))


__all__ = ["Ask", "Decision", "Judge", "Verdict", "advance", "conclude", "run_chain", "start"]
