"""The LLM judge: one constrained generation decides what the judges before it left undecided.

Last in every chain. What it does depends on what is left:

- An undecided message in ``auto`` mode, with the cards loaded: one
  generation decides whether a candidate is needed *and* writes its call
  (``prompts.call_schema``: a call of one candidate, or ``{"tool":"none"}``).
  Choosing and then filling took two generations in series. It is shown the
  best-ranked ``shown`` candidates (``SelectorSettings.band_candidates``, 1 by
  default): the embedding ranks *which* tool, the model judges *whether*. On
  the generality dev split the 135M model never chose right among three where
  the first-ranked was wrong, and twice chose a lower one where the first was
  right ("create a note" for a search of notes); shown the first alone it
  chose 82 of 108 turns right where it chose 80 among three, in less time. The worked
  decisions are the candidates' own calls (their examples, or, for a tool
  described only, calls built from its card: ``shots.card_calls``) and the
  nearest requests no tool serves, nearest in shape last.
- A decided message with clauses still undecided: each clause is chosen for
  (``prompts.choose_schema``) among its best-ranked ``shown`` candidates too,
  concurrently, and its tools join the verdict (on dev: the same 82 turns
  right, one spurious extra tool fewer).
- ``required`` mode with nothing chosen, or a chain with no embedding (the
  ``llm`` mode): a constrained choice among the candidates (every tool).
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import replace
from typing import Any

from services.router.metrics import RouterMetrics, count_dropped, count_selection
from services.router.planning.copying import copy_constrained
from services.router.planning.formats import complete
from services.router.planning.grounding import ground
from services.router.planning.inputs import PlannedCall, context, resolved
from services.router.planning.judges import Ask, Decision, Verdict
from services.router.planning.prompts import (
    CALL_SHOTS,
    NO_CALL,
    call_messages,
    call_schema,
    choose_messages,
    choose_schema,
    parse_call,
    parse_choice,
    worked_examples,
)
from services.router.planning.shots import card_calls
from services.router.planning.structured import Structured

log = logging.getLogger(__name__)

CHOOSE_MAX_TOKENS = 48


class LlmJudge:
    name = "llm"

    def __init__(
        self,
        structured: Structured,
        *,
        fill_max_tokens: int = 160,
        shown: int = 1,
        metrics: RouterMetrics | None = None,
    ):
        self._structured = structured
        self._fill_max_tokens = fill_max_tokens
        self._shown = shown
        self._metrics = metrics

    async def judge(self, ask: Ask, verdict: Verdict) -> Verdict | None:
        mode = ask.turn.mode
        if verdict.decision is Decision.TOOLS and verdict.undecided:
            return await self._clauses(ask, verdict)
        if verdict.decision is Decision.TOOLS or (verdict.decision is Decision.NONE and mode != "required"):
            return None
        candidates = list(verdict.candidates) or ask.names
        if ask.index is None:  # no embedding: the model chooses among every tool
            names = await self.choose(ask, candidates, mode)
            count_selection(self._metrics, "llm", "tools" if names else "none")
            return self._chosen(verdict, names)
        if mode == "auto":
            calls = await self._decide_call(ask, list(verdict.candidates)[: self._shown] or ask.names)
            return replace(
                verdict,
                decision=Decision.TOOLS if calls else Decision.NONE,
                tools=tuple(c.name for c in calls),
                candidates=(),
                calls=tuple(calls),
                by=self.name,
            )
        return self._chosen(verdict, await self.choose(ask, candidates, mode))

    def _chosen(self, verdict: Verdict, names: list[str]) -> Verdict:
        decision = Decision.TOOLS if names else Decision.NONE
        return replace(verdict, decision=decision, tools=tuple(names), segments={}, candidates=(), by=self.name)

    async def _clauses(self, ask: Ask, verdict: Verdict) -> Verdict:
        """A second ask no judge could decide: the model chooses for each such clause, concurrently."""
        clause_turns = [replace(ask.turn, message=part) for part, _ in verdict.undecided]
        chosen = await asyncio.gather(
            *(
                self.choose(replace(ask, turn=clause), list(candidates)[: self._shown], "auto")
                for clause, (_, candidates) in zip(clause_turns, verdict.undecided, strict=True)
            )
        )
        tools, segments = list(verdict.tools), dict(verdict.segments)
        for clause, extra in zip(clause_turns, chosen, strict=True):
            for name in extra:
                if name not in segments:
                    tools.append(name)
                    segments[name] = clause.message
        return replace(verdict, tools=tuple(tools), segments=segments, undecided=(), by=self.name)

    async def choose(self, ask: Ask, candidates: list[str], mode: str, results: str | None = None) -> list[str]:
        """A constrained choice of tools among ``candidates`` (``prompts.choose_messages``)."""
        schema = json.dumps(choose_schema(candidates, mode), sort_keys=True)
        shown = [t for t in ask.specs if t.name in candidates]
        no_tool = ask.index.no_tool_examples if ask.index is not None else None
        messages = choose_messages(shown, ask.message, results, **({"no_tool": no_tool} if no_tool else {}))
        text = await self._structured(messages, schema, ask.turn.priority, ask.counters, CHOOSE_MAX_TOKENS)
        return parse_choice(text, candidates)

    async def _decide_call(self, ask: Ask, candidates: list[str]) -> list[PlannedCall]:
        """One generation decides whether a candidate is needed and writes its call."""
        index = ask.index
        if index is None:
            return []
        turn = ask.turn
        by_name = {t.name: t for t in ask.specs}
        shown = [by_name[n] for n in candidates if n in by_name]
        full = context(turn, [t.name for t in shown], index.language)
        text, told = resolved(turn.message, turn, full, index.language)
        parameters = [
            (t.name, copy_constrained(t.parameters_json_schema, text, told, implied=not t.examples, tool_name=t.name))
            for t in shown
        ]
        positives: list[tuple[str, dict[str, Any]]] = [
            (q, {"tool": t.name, "arguments": a}) for t in shown for q, a in worked_examples(t) or card_calls(t)
        ]
        misses = [n for t in shown for n in t.negative_examples] if len(shown) == 1 else []
        negatives: list[tuple[str, dict[str, Any]]] = [
            (q, {"tool": NO_CALL}) for q in [*index.no_tool_examples, *misses]
        ]
        nearest = [
            *await index.nearest(text, positives, CALL_SHOTS),
            *await index.nearest(text, negatives, CALL_SHOTS),
        ]
        shots = await index.nearest(text, nearest, len(nearest))
        asked = f"Earlier: {told}\nNow: {text}" if told else text
        out = await self._structured(
            call_messages(shown, asked, shots),
            json.dumps(call_schema(parameters)),
            turn.priority,
            ask.counters,
            self._fill_max_tokens,
        )
        decided = parse_call(out, [t.name for t in shown])
        if decided is None:
            return []
        name, arguments = decided
        if not by_name[name].examples:  # a date or address the user wrote reaches its property (``formats.py``)
            arguments = complete(by_name[name].parameters_json_schema, arguments, text, name)
        checked = ground(arguments, by_name[name].parameters_json_schema, turn.message, full, language=index.language)
        if checked.arguments is None:
            count_dropped(self._metrics, "ungrounded")
            log.warning("dropped planned call %s%s: %s", name, arguments, "; ".join(checked.invented))
            return []
        return [PlannedCall(name, checked.arguments)]


__all__ = ["CHOOSE_MAX_TOKENS", "LlmJudge"]
