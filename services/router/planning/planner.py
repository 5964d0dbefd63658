"""The planner: one message through the pipeline, inputs → candidates → judges → fill → grounding.

In: the tool list, the turn (``inputs.PlanInput``) and its counters. Out: a
``Plan`` — the calls to run, how they were selected and which judge decided.

1. ``inputs``: a bare-number follow-up is restated as the previous ask.
2. ``candidates``: the message, its clauses and (for a follow-up) the message
   with the previous one are embedded and scored against the tool cards —
   only when the chain has a similarity judge.
3. ``judges``: the chain assembled from ``PlanningSettings.judges`` decides
   the tools (or no tool), each judge passing what it cannot decide.
4. ``fill``: each chosen tool's arguments, concurrently — unless the deciding
   judge already wrote the call (the LLM judge in the band).
5. ``grounding``: inside the fill and the LLM judge, a call whose required
   values the conversation does not support is dropped.

A ``named`` tool choice skips the judges; ``required`` makes the LLM judge
choose even where the others found no tool.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from opentelemetry import trace

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from services.router.metrics import RouterMetrics, count_selection
from services.router.planning.candidates import CardIndex
from services.router.planning.embedding import Embedder
from services.router.planning.fill import Filler
from services.router.planning.inputs import Plan, PlanInput, PlannedCall, restated
from services.router.planning.judges import Ask, Decision, Judge, Verdict, advance, conclude, run_chain, start
from services.router.planning.judges.classifier import ClassifierJudge
from services.router.planning.judges.likelihood import LikelihoodJudge
from services.router.planning.judges.llm import LlmJudge
from services.router.planning.judges.schema import SchemaJudge
from services.router.planning.judges.similarity import SimilarityJudge
from services.router.planning.judges.whether import WhetherJudge
from services.router.planning.no_tool_examples import CAPABILITY_ASKS, NO_TOOL_EXAMPLES
from services.router.planning.scoring import Scorer
from services.router.planning.settings import PlanningSettings
from services.router.planning.structured import Structured
from services.router.replicas.generation import Generator
from services.router.turn.progress import TurnCounters
from services.runtime.language import language_for


def build_chain(
    settings: PlanningSettings, structured: Structured, scorer: Scorer, metrics: RouterMetrics | None = None
) -> tuple[list[Judge], LlmJudge]:
    """The judges ``settings.judges`` names, in that order (and the LLM judge, which a replan also uses)."""
    llm = LlmJudge(
        structured, fill_max_tokens=settings.fill_max_tokens, shown=settings.selector.band_candidates, metrics=metrics
    )
    made: dict[str, Judge] = {
        "similarity": SimilarityJudge(settings.selector, metrics),
        "schema": SchemaJudge(settings.selector, metrics),
        "classifier": ClassifierJudge(settings.selector, metrics),
        "whether": WhetherJudge(settings.selector, metrics),
        "likelihood": LikelihoodJudge(scorer, settings.selector, metrics),
        "llm": llm,
    }
    return [made[name] for name in settings.judges], llm


async def scored_ask(
    index: CardIndex, specs: Sequence[common_pb2.ToolSpec], turn: PlanInput, counters: TurnCounters
) -> Ask:
    """The candidates stage: the message, its clauses and its follow-up text scored against the cards."""
    parts = index.language.clauses(turn.message)
    follow_up = f"{turn.previous_message} {turn.message}" if turn.previous_message else ""
    texts = [turn.message, *parts, *([follow_up] if follow_up else [])]
    cards = index.cards
    asks = [*texts[:-1], turn.message] if follow_up else texts  # a follow-up does what its own verb says
    scored = tuple(await index.score(texts, asks)) if cards is not None and cards.tools else ()
    return Ask(turn, specs, counters, index, scored, tuple(parts), follow_up)


class Planner:
    """Plans a turn's calls with the chain ``settings.judges`` (``build_chain``)."""

    def __init__(
        self,
        generator: Generator,
        settings: PlanningSettings,
        embedder: Embedder | None = None,
        *,
        metrics: RouterMetrics | None = None,
        tracer: trace.Tracer | None = None,
        no_tool_examples: Sequence[str] = NO_TOOL_EXAMPLES,
        capability_asks: Sequence[str] = CAPABILITY_ASKS,
        index: CardIndex | None = None,
        first_judge: Judge | None = None,
    ) -> None:
        """``index`` and ``first_judge`` stand in for the card index and the similarity judge (unit tests of the
        judges after it); everything else is built here from ``settings``."""
        if settings.embeds and embedder is None and index is None:
            raise ValueError(f"the judge chain {','.join(settings.judges)} embeds messages: it needs an embedder")
        self._settings = settings
        self._language = language_for(settings.language)
        self._metrics = metrics
        self._tracer = tracer or trace.get_tracer("agentmesh.router")
        structured = Structured(generator, metrics, self._tracer)
        if index is None and settings.embeds and embedder is not None:
            asks = self._language.ask_examples() if "whether" in settings.judges else ()
            index = CardIndex(
                embedder, settings.selector, no_tool_examples, self._language, capability_asks, ask_examples=asks
            )
        self._index = index
        self._judges, self._llm = build_chain(settings, structured, Scorer(generator, self._tracer), metrics)
        if first_judge is not None:
            self._judges[0] = first_judge
        self._filler = Filler(
            structured, self._language, self._index, max_tokens=settings.fill_max_tokens, metrics=metrics
        )

    @property
    def judges(self) -> list[str]:
        """The chain's judges, in order."""
        return [j.name for j in self._judges]

    @property
    def index(self) -> CardIndex | None:
        return self._index

    @property
    def replans(self) -> bool:
        """Whether a tool round is followed by another choice (a chain that embeds nothing: the ``llm`` mode)."""
        return self._index is None and "llm" in self.judges

    async def prepare(self, specs: Sequence[common_pb2.ToolSpec]) -> None:
        """Embed the tools' cards when the tool list is loaded (only what changed)."""
        if self._index is not None:
            await self._index.load(specs)

    async def plan(self, specs: Sequence[common_pb2.ToolSpec], turn: PlanInput, counters: TurnCounters) -> Plan:
        """The first round's calls: judge, then fill each chosen tool concurrently."""
        with self._tracer.start_as_current_span("agent.plan") as span:
            turn = restated(turn, self._language)
            if turn.mode == "named":
                count_selection(self._metrics, "named", "tools")
                calls = await self._filler.fill(specs, [turn.named_tool], {}, turn, counters)
                span.set_attribute("agentmesh.tool_selection", "TOOL_SELECTION_NAMED")
                return Plan(calls, agent_pb2.TOOL_SELECTION_NAMED, "named")
            verdict = await self._judge(specs, turn, counters, span)
            method = self._method(verdict)
            span.set_attribute("agentmesh.tool_selection", agent_pb2.ToolSelection.Name(method))
            span.set_attribute("agentmesh.judge", verdict.by)
            if verdict.calls is not None:
                calls = list(verdict.calls)
            elif verdict.decision is Decision.TOOLS:
                calls = await self._filler.fill(specs, verdict.tools, dict(verdict.segments), turn, counters)
            else:
                calls = []
            span.set_attribute("agentmesh.planned_calls", [c.name for c in calls])
            return Plan(calls, method, verdict.by)

    async def replan(
        self, specs: Sequence[common_pb2.ToolSpec], turn: PlanInput, results: str, counters: TurnCounters
    ) -> list[PlannedCall]:
        """A chain without embedding only: choose again with the results so far (the ``llm`` mode's second round)."""
        with self._tracer.start_as_current_span("agent.plan"):
            ask = Ask(turn, specs, counters)
            names = await self._llm.choose(ask, [t.name for t in specs], "auto", results)
            return await self._filler.fill(specs, names, {}, turn, counters)

    async def _judge(
        self, specs: Sequence[common_pb2.ToolSpec], turn: PlanInput, counters: TurnCounters, span: trace.Span
    ) -> Verdict:
        index = self._index
        if index is None:
            return await run_chain(self._judges, Ask(turn, specs, counters))
        started = time.perf_counter()
        if not index.loaded:
            await index.load(specs)
        ask = await scored_ask(index, specs, turn, counters)
        verdict = await advance(self._judges[:1], ask, start(ask))  # the similarity judge: no generation
        if self._metrics is not None:
            self._metrics.selection_seconds.observe(time.perf_counter() - started)
        span.set_attribute("agentmesh.selector.decision", verdict.decision.value)
        span.set_attribute("agentmesh.selector.scores", json.dumps(verdict.scores, sort_keys=True))
        span.set_attribute("agentmesh.selector.none_score", round(verdict.none_score, 4))
        if verdict.judged[1]:
            span.set_attribute("agentmesh.selector.judged", verdict.judged[0] or "none")
            span.set_attribute("agentmesh.selector.judged_probability", round(verdict.judged[1], 4))
        return conclude(await advance(self._judges[1:], ask, verdict))

    @staticmethod
    def _method(verdict: Verdict) -> agent_pb2.ToolSelection.ValueType:
        """How the client is told the tools were selected: by a generation, or by the embedding judges."""
        return agent_pb2.TOOL_SELECTION_LLM if verdict.by == "llm" else agent_pb2.TOOL_SELECTION_EMBEDDING
