"""The plan step of a turn: which tools (selection), then their arguments (fill), as ``PlannedCall``s.

In: the tool list, the user's message, the tool-choice mode and what the
session says about the previous turn. Out: a ``Plan`` — the calls to run, how
the tools were selected, and the generations it took (counted on the turn).

Selection, by ``--tool-selection``:

- ``embedding`` (default): the ``ToolSelector`` decides without a generation;
  only its ambiguous band asks the model (a constrained choice among the
  candidates). A message with two asks gets both tools, each filled from the
  clause that asked for it.
- ``llm``: the constrained choice decides every message (the previous path,
  kept for comparison in ``make eval``).

Fill is one schema-constrained generation per chosen tool, all concurrent —
or none, when the copy-constrained schema leaves one choice (one place, one
URL, the question as a search query). Follow-ups: a bare number ("And 30?")
is planned as the previous ask with that number; "that result" is read as the
previous turn's number, and the message then stands alone; otherwise a fill of
the tool that ran last turn sees that turn, and its call as the nearest worked
example. A fill that does not parse, or that carries a number the conversation does not
ground (``grounding.py``), is dropped and counted, never run.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from opentelemetry import trace

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from services.router.generation import GenerationDone, GenerationSpec, Generator
from services.router.grounding import ungrounded
from services.router.metrics import RouterMetrics
from services.router.no_tool_examples import NO_TOOL_EXAMPLES
from services.router.planner import (
    CALL_SHOTS,
    FILL_EXAMPLES,
    NO_CALL,
    PlannedCall,
    applies,
    call_messages,
    call_schema,
    choose_messages,
    choose_schema,
    copy_constrained,
    determined,
    evident,
    fill_messages,
    parse_arguments,
    parse_call,
    parse_choice,
    pinned,
    unmentioned,
    worked_examples,
)
from services.router.prompt import Message
from services.router.selector import Decision, Selection, ToolSelector

log = logging.getLogger(__name__)

SELECTION_MODES = ("embedding", "llm")
CHOOSE_MAX_TOKENS = 48

#: A phrase that stands for the previous turn's result ("add 6 to that result", "double it"): the fill reads
#: the number in its place, since a small model asked to carry it over copies it and forgets the operation.
_THAT_RESULT = re.compile(
    r"\b(?:that|the|this|previous|last)\s+(?:result|answer|number|total|value|amount|sum|figure|price|cost)\b"
    r"|(?<!\bis )(?<!\bwas )\b(?:that|it)\b"  # not "what time is it"
    r"(?=\s*(?:[.?!,;]|$|\b(?:by|to|from|and|times|plus|minus|divided|squared|cubed)\b))",
    re.IGNORECASE,
)

#: A follow-up that is only a new number ("And 30?", "What about 45?", "How about for 12?").
_ONLY_A_NUMBER = re.compile(
    r"^\s*(?:(?:and|or|now|then|what about|how about)\s+)*(?:for\s+|with\s+)?"
    r"(?P<number>-?\d[\d,]*(?:\.\d+)?)\s*[?.!]*\s*$",
    re.IGNORECASE,
)
_A_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def restated(turn: PlanInput) -> PlanInput:
    """A bare-number follow-up as the previous ask with that number in place of its one number, standing alone.

    "Convert 20 celsius to fahrenheit" then "And 30?": the ask is "Convert 30
    celsius to fahrenheit". Said whole, the selector sees the ask (a bare "30"
    scores as arithmetic) and the fill copies "30 celsius" from it instead of
    composing it from the earlier turn. A previous ask with no number, or with
    several ("12*12" then "And 13?"), is not guessed at: the turn is planned as
    it came.
    """
    asked = _ONLY_A_NUMBER.match(turn.message)
    if asked is None or not turn.previous_message:
        return turn
    if len(_A_NUMBER.findall(turn.previous_message)) != 1:
        return turn
    message = _A_NUMBER.sub(lambda _: asked["number"], turn.previous_message, count=1)
    return PlanInput(message, turn.mode, turn.named_tool, turn.priority)  # standing alone: no earlier turn


#: Words by which a message refers back to the previous answer ("add 6 to that result").
_REFERS_BACK = re.compile(
    r"\b(that|it|this|result|answer|previous|same|again|those|these|them|there|then)\b", re.IGNORECASE
)


@dataclass
class TurnCounters:
    """What a turn's generations cost, summed over choose, fill and answer."""

    usage: common_pb2.Usage = field(default_factory=common_pb2.Usage)
    generations: int = 0

    def add(self, done: GenerationDone, metrics: RouterMetrics | None) -> None:
        self.generations += 1
        self.usage.prompt_tokens += done.usage.prompt_tokens
        self.usage.completion_tokens += done.usage.completion_tokens
        self.usage.cached_prompt_tokens += done.usage.cached_prompt_tokens
        if metrics is not None:
            metrics.prompt_tokens.inc(done.usage.prompt_tokens)
            metrics.cached_prompt_tokens.inc(done.usage.cached_prompt_tokens)


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
class Plan:
    calls: list[PlannedCall]
    method: agent_pb2.ToolSelection.ValueType


def annotate(span: trace.Span, done: GenerationDone) -> None:
    """Where a generation ran and what it cost, on its span."""
    span.set_attribute("agentmesh.replica", done.replica)
    span.set_attribute("agentmesh.replica_reason", done.reason)
    span.set_attribute("agentmesh.cached_prompt_tokens", done.usage.cached_prompt_tokens)
    span.set_attribute("agentmesh.response_cached", done.cached)
    span.set_attribute("agentmesh.failovers", done.failovers)


class Planner:
    def __init__(
        self,
        generator: Generator,
        selector: ToolSelector | None,
        *,
        fill_max_tokens: int = 160,
        metrics: RouterMetrics | None = None,
        tracer: trace.Tracer | None = None,
    ) -> None:
        self._generator = generator
        self._selector = selector
        self._fill_max_tokens = fill_max_tokens
        self._metrics = metrics
        self._tracer = tracer or trace.get_tracer("agentmesh.router")

    @property
    def selection_mode(self) -> str:
        return "llm" if self._selector is None else "embedding"

    async def prepare(self, specs: Sequence[common_pb2.ToolSpec]) -> None:
        """Embed the tools' cards (embedding selection) when the tool list is loaded."""
        if self._selector is not None:
            await self._selector.load(specs)

    async def plan(self, specs: Sequence[common_pb2.ToolSpec], turn: PlanInput, counters: TurnCounters) -> Plan:
        """The first round's calls: select, then fill each selected tool concurrently."""
        with self._tracer.start_as_current_span("agent.plan") as span:
            turn = restated(turn)
            names, segments, method, decided = await self._select(specs, turn, counters)
            span.set_attribute("agentmesh.tool_selection", agent_pb2.ToolSelection.Name(method))
            calls = decided if decided is not None else await self.fill(specs, names, segments, turn, counters)
            span.set_attribute("agentmesh.planned_calls", [c.name for c in calls])
            return Plan(calls, method)

    async def replan(
        self, specs: Sequence[common_pb2.ToolSpec], turn: PlanInput, results: str, counters: TurnCounters
    ) -> list[PlannedCall]:
        """LLM selection only: choose again with the results so far (the previous path's second round)."""
        with self._tracer.start_as_current_span("agent.plan"):
            names = await self._choose(specs, [t.name for t in specs], turn, "auto", counters, results)
            return await self.fill(specs, names, {}, turn, counters)

    async def _select(
        self, specs: Sequence[common_pb2.ToolSpec], turn: PlanInput, counters: TurnCounters
    ) -> tuple[list[str], dict[str, str], agent_pb2.ToolSelection.ValueType, list[PlannedCall] | None]:
        """The tools to fill (with the clause each was asked in) and how they were selected — or, from the
        ambiguous band, the calls themselves, decided and filled in one generation."""
        if turn.mode == "named":
            self._count("named", "tools")
            return [turn.named_tool], {}, agent_pb2.TOOL_SELECTION_NAMED, None
        all_names = [t.name for t in specs]
        if self._selector is None:
            names = await self._choose(specs, all_names, turn, turn.mode, counters)
            self._count("llm", "tools" if names else "none")
            return names, {}, agent_pb2.TOOL_SELECTION_LLM, None
        started = time.perf_counter()
        selection = await self._selector.select(turn.message, previous_message=turn.previous_message)
        selection = self._applicable(specs, selection, turn)
        if self._metrics is not None:
            self._metrics.selection_seconds.observe(time.perf_counter() - started)
        span = trace.get_current_span()
        span.set_attribute("agentmesh.selector.decision", selection.decision.value)
        span.set_attribute("agentmesh.selector.scores", json.dumps(selection.scores, sort_keys=True))
        span.set_attribute("agentmesh.selector.none_score", round(selection.none_score, 4))
        if selection.judged[1]:
            span.set_attribute("agentmesh.selector.judged", selection.judged[0] or "none")
            span.set_attribute("agentmesh.selector.judged_probability", round(selection.judged[1], 4))
        self._count("embedding", selection.decision.value)
        if selection.decision is Decision.TOOLS:
            names, segments = list(selection.tools), dict(selection.segments)
            if not selection.undecided:
                return names, segments, agent_pb2.TOOL_SELECTION_EMBEDDING, None
            # A second ask the classifier could not decide: the model decides that clause, concurrently.
            clause_turns = [replace(turn, message=part) for part, _ in selection.undecided]
            chosen = await asyncio.gather(
                *(
                    self._choose(specs, candidates, clause, "auto", counters)
                    for clause, (_, candidates) in zip(clause_turns, selection.undecided, strict=True)
                )
            )
            for clause, extra in zip(clause_turns, chosen, strict=True):
                for name in extra:
                    if name not in segments:
                        names.append(name)
                        segments[name] = clause.message
            return names, segments, agent_pb2.TOOL_SELECTION_LLM, None
        if selection.decision is Decision.NONE and turn.mode != "required":
            return [], {}, agent_pb2.TOOL_SELECTION_EMBEDDING, None
        # The ambiguous band (or "required" with no clear tool): the model decides among the candidates.
        candidates = list(selection.candidates) or all_names
        if turn.mode == "auto":
            return [], {}, agent_pb2.TOOL_SELECTION_LLM, await self._decide_call(specs, candidates, turn, counters)
        names = await self._choose(specs, candidates, turn, turn.mode, counters)
        return names, {}, agent_pb2.TOOL_SELECTION_LLM, None

    async def _decide_call(
        self, specs: Sequence[common_pb2.ToolSpec], candidates: Sequence[str], turn: PlanInput, counters: TurnCounters
    ) -> list[PlannedCall]:
        """The ambiguous band: one generation decides whether a candidate is needed and writes its call.

        Choosing and then filling took two generations in series, so a single-tool turn decided here took
        three with the answer. The worked decisions are the candidates' examples as calls and the nearest
        requests no tool serves (with one candidate, its near misses too), nearest in shape last.
        """
        selector = self._selector
        if selector is None:  # the band is the embedding selector's
            return []
        by_name = {t.name: t for t in specs}
        shown = [by_name[n] for n in candidates if n in by_name]
        context = self._context(turn, [t.name for t in shown])
        text, told = self._resolved(turn.message, turn, context)
        parameters = [(t.name, copy_constrained(t.parameters_json_schema, text, told)) for t in shown]
        positives: list[tuple[str, dict[str, Any]]] = [
            (q, {"tool": t.name, "arguments": a}) for t in shown for q, a in worked_examples(t)
        ]
        misses = [n for t in shown for n in t.negative_examples] if len(shown) == 1 else []
        negatives: list[tuple[str, dict[str, Any]]] = [(q, {"tool": NO_CALL}) for q in [*NO_TOOL_EXAMPLES, *misses]]
        nearest = [
            *await selector.nearest(text, positives, CALL_SHOTS),
            *await selector.nearest(text, negatives, CALL_SHOTS),
        ]
        shots = await selector.nearest(text, nearest, len(nearest))
        asked = f"Earlier: {told}\nNow: {text}" if told else text
        out = await self.structured(
            call_messages(shown, asked, shots),
            json.dumps(call_schema(parameters)),
            turn.priority,
            counters,
            self._fill_max_tokens,
        )
        decided = parse_call(out, [t.name for t in shown])
        if decided is None:
            return []
        call = self._checked(decided[0], decided[1], turn.message, context)
        return [call] if call is not None else []

    @staticmethod
    def _context(turn: PlanInput, names: Sequence[str]) -> str:
        """The previous turn, when the message refers back or uses a tool that turn used; else ""."""
        previous = {name for name, _ in turn.previous_calls}
        if (turn.previous_message or turn.previous_answer) and (
            _REFERS_BACK.search(turn.message) or any(name in previous for name in names)
        ):
            # Both sides of the previous turn: "there" names a place the user said, "that" a number the answer
            # said; and a tool used again right after its last call is a follow-up of it ("What about 7 kg?").
            return " ".join(filter(None, (turn.previous_message, turn.previous_answer)))
        return ""

    @staticmethod
    def _resolved(text: str, turn: PlanInput, context: str) -> tuple[str, str]:
        """``text`` with "that result" read as the previous result, and the context the fill still needs."""
        if turn.previous_result:
            said = _THAT_RESULT.sub(turn.previous_result, text)
            if said != text:  # "divide 200 by 8" says it all: the earlier turn would only be copied back
                return said, ""
        return text, context

    def _checked(self, name: str, arguments: dict[str, Any], message: str, context: str) -> PlannedCall | None:
        """The call, unless a number in it is grounded nowhere in the conversation (then dropped, counted)."""
        invented = ungrounded(arguments, message, context)
        if invented:
            self._drop("ungrounded")
            log.warning("dropped planned call %s%s: %s not in the conversation", name, arguments, invented)
            return None
        return PlannedCall(name, arguments)

    def _applicable(self, specs: Sequence[common_pb2.ToolSpec], selection: Selection, turn: PlanInput) -> Selection:
        """The selection less the tools whose schema the message cannot fill (``planner.applies``): a
        conversion with no quantity, a fetch with no URL. A message left with no tool needs none."""
        schemas = {t.name: t.parameters_json_schema for t in specs}
        earlier = (turn.previous_message, turn.previous_answer)

        def fits(name: str, text: str) -> bool:
            ok = name not in schemas or applies(schemas[name], text, *earlier)
            if not ok:
                self._count("embedding", "not_applicable")
            return ok

        # A tool chosen from a clause that cannot fill it may have the rest of its ask in another clause ("Bought a
        # 2 litre bottle for the party, how many cups is that?"; "…the signs say 130 km/h, what's that in mph?"):
        # it fills from the whole message then.
        segments = dict(selection.segments)
        for n in selection.tools:
            part = segments.get(n, turn.message)
            if part != turn.message and n in schemas:
                missing = unmentioned(schemas[n], part, *earlier) - unmentioned(schemas[n], turn.message, *earlier)
                if missing:
                    segments[n] = turn.message
        tools = tuple(n for n in selection.tools if fits(n, segments.get(n, turn.message)))
        undecided = tuple(
            (part, kept) for part, names in selection.undecided if (kept := tuple(n for n in names if fits(n, part)))
        )
        candidates = tuple(n for n in selection.candidates if fits(n, turn.message))
        if selection.decision is Decision.TOOLS and not tools:
            if not undecided:
                return replace(selection, decision=Decision.NONE, tools=(), segments={}, undecided=())
            return replace(
                selection,
                decision=Decision.AMBIGUOUS,
                tools=(),
                segments={},
                undecided=(),
                candidates=tuple(n for _, names in undecided for n in names),
            )
        if selection.decision is Decision.AMBIGUOUS and not candidates:
            return replace(selection, decision=Decision.NONE, candidates=())
        if selection.decision is Decision.AMBIGUOUS:
            shown = [n for n in candidates if n in schemas and evident(schemas[n], turn.message)]
            if len(shown) == 1:  # the tool's own shape is in the message: its ask, no generation deciding
                self._count("embedding", "evident")
                return replace(selection, decision=Decision.TOOLS, tools=(shown[0],), segments={}, candidates=())
            best = candidates[0]
            if best in schemas and pinned(schemas[best], turn.message) and self._leads(selection, best, turn.message):
                # Naming exactly the one value each of the tool's copied arguments needs (``planner.pinned``), and
                # near its asks by the lead ``_leads`` asks for: its ask, decided without a generation.
                self._count("embedding", "pinned")
                return replace(selection, decision=Decision.TOOLS, tools=(best,), segments={}, candidates=())
            judged = self._judged(selection, candidates)
            if judged is not None:
                # The card classifier is sure (``card_classifier.py``): its verdict, with no generation deciding.
                self._count("embedding", "classified")
                if not judged:
                    return replace(selection, decision=Decision.NONE, candidates=())
                return replace(selection, decision=Decision.TOOLS, tools=(judged,), segments={}, candidates=())
        segments = {n: segments[n] for n in tools if n in segments}
        return replace(selection, tools=tools, segments=segments, undecided=undecided, candidates=candidates)

    def _judged(self, selection: Selection, candidates: Sequence[str]) -> str | None:
        """The card classifier's confident verdict on an ambiguous message: a candidate tool, or "" for no tool;
        None when it is unsure or names a tool that is not a candidate (the generation decides then)."""
        if self._selector is None:
            return None
        judged = selection.confidently_judged(self._selector.settings.band_confidence)
        return judged if judged is not None and (not judged or judged in candidates) else None

    def _leads(self, selection: Selection, tool: str, message: str) -> bool:
        """Whether ``tool`` leads the message's "not this tool" score by the lead no intent word overrules, or,
        when the message shares one of its intent words, by ``pin_lead`` ("Would she be having dinner around
        now?" of a sister in Seoul scores below ``choose``: the lexical judge agrees, so a smaller lead does)."""
        selector = self._selector
        if selector is None:
            return False
        settings = selector.settings
        needed = settings.pin_lead if selector.shares_intent(tool, message) else settings.overrule
        return selection.scores.get(tool, 0.0) - selection.none_score >= needed

    async def _choose(  # noqa: PLR0917 - private, few callers
        self,
        specs: Sequence[common_pb2.ToolSpec],
        candidates: Sequence[str],
        turn: PlanInput,
        mode: str,
        counters: TurnCounters,
        results: str | None = None,
    ) -> list[str]:
        schema = json.dumps(choose_schema(candidates, mode), sort_keys=True)
        shown = [t for t in specs if t.name in candidates]
        text = await self.structured(
            choose_messages(shown, turn.message, results), schema, turn.priority, counters, CHOOSE_MAX_TOKENS
        )
        return parse_choice(text, candidates)

    async def fill(
        self,
        specs: Sequence[common_pb2.ToolSpec],
        names: Sequence[str],
        segments: dict[str, str],
        turn: PlanInput,
        counters: TurnCounters,
    ) -> list[PlannedCall]:
        """Arguments for each named tool, filled concurrently; unparseable or ungrounded fills are dropped."""
        by_name = {t.name: t for t in specs}
        previous = {name: args for name, args in turn.previous_calls}
        context = self._context(turn, names)

        async def fill_one(name: str) -> str:
            tool = by_name[name]
            text, told = self._resolved(segments.get(name, turn.message), turn, context)
            schema = copy_constrained(tool.parameters_json_schema, text, told)
            known = determined(schema)
            if known is not None:  # the grammar leaves one choice: nothing for a generation to decide
                return json.dumps(known)
            shots: list[tuple[str, dict[str, Any]]] | None = None
            if self._selector is not None:  # nearest in meaning beats nearest in words (EVAL.md)
                shots = await self._selector.nearest(text, worked_examples(tool), FILL_EXAMPLES)
            if told and name in previous:  # the last call of this tool is the nearest example of all
                shots = [*(shots or [])[1:], (turn.previous_message, previous[name])]
            messages = fill_messages(tool, text, told, shots)
            return await self.structured(messages, schema, turn.priority, counters, self._fill_max_tokens)

        texts = await asyncio.gather(*(fill_one(name) for name in names))
        calls = []
        for name, text in zip(names, texts, strict=True):
            arguments = parse_arguments(text)
            if arguments is None:
                self._drop("unparseable")
                continue
            call = self._checked(name, arguments, turn.message, context)
            if call is not None:
                calls.append(call)
        return calls

    async def structured(
        self,
        messages: Sequence[Message],
        schema: str,
        priority: common_pb2.Priority.ValueType,
        counters: TurnCounters,
        max_tokens: int,
    ) -> str:
        """One greedy generation constrained to ``schema``; its full text."""
        with self._tracer.start_as_current_span("agent.generation") as span:
            spec = GenerationSpec(
                messages,
                common_pb2.SamplingParams(temperature=0.0, max_tokens=max_tokens),
                priority or common_pb2.PRIORITY_P1,
                json_schema=schema,
            )
            parts: list[str] = []
            done: GenerationDone | None = None
            async for event in self._generator.stream(spec):
                parts.append(event.text)
                done = event.done or done
            if done is None:  # the generator always ends with done; a bug otherwise
                raise RuntimeError("generation ended without a result")
            annotate(span, done)
            counters.add(done, self._metrics)
            return "".join(parts)

    def _count(self, method: str, outcome: str) -> None:
        if self._metrics is not None:
            self._metrics.tool_selection.labels(method, outcome).inc()

    def _drop(self, reason: str) -> None:
        if self._metrics is not None:
            self._metrics.dropped_calls.labels(reason).inc()
