"""Stand-ins for planning's unit tests: a scripted model, a deterministic embedder, judges with fixed verdicts."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any, cast

import numpy as np

from agentmesh.common.v1 import common_pb2
from services.router.planning import Planner, PlanningSettings, SelectorSettings
from services.router.planning.candidates import CardIndex
from services.router.planning.embedding import Vectors
from services.router.planning.fill import Filler
from services.router.planning.inputs import PlanInput
from services.router.planning.judges import Ask, Decision, Verdict, advance, start
from services.router.planning.judges.similarity import SimilarityJudge
from services.router.planning.no_tool_examples import NO_TOOL_EXAMPLES
from services.router.planning.planner import scored_ask
from services.router.planning.structured import Structured
from services.router.replicas.generation import GenerationDone, GenerationEvent, GenerationSpec, Generator
from services.router.sessions.records import ToolRecord, TurnRecord
from services.router.turn.progress import TurnCounters
from services.runtime.language import ENGLISH

OK = common_pb2.TOOL_CALL_STATUS_OK


class Scripted:
    """Answers every generation with the next scripted text and keeps the specs it was asked; a scoring (the
    likelihood judge's) is kept apart and ties (every continuation scores 0: the order stays the cards')."""

    def __init__(self, *texts: str) -> None:
        self.texts = list(texts)
        self.asked: list[GenerationSpec] = []
        self.scored: list[GenerationSpec] = []

    async def stream(self, spec: GenerationSpec) -> AsyncIterator[GenerationEvent]:
        if spec.continuation:
            self.scored.append(spec)
            usage = common_pb2.Usage(prompt_tokens=10)
            yield GenerationEvent(
                done=GenerationDone(usage, common_pb2.FINISH_REASON_LENGTH, 0.0, "r0", "test", continuation=(0.0, 1))
            )
            return
        self.asked.append(spec)
        done = GenerationDone(common_pb2.Usage(), common_pb2.FINISH_REASON_STOP, 0.0, "r0", "test")
        yield GenerationEvent(text=self.texts.pop(0), done=done)


class BagOfWords:
    """A deterministic stand-in for a sentence embedder: hashed word counts, L2-normalised."""

    name = "bag-of-words"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls.append(list(texts))
        out = np.zeros((len(texts), 512), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                out[i, int(hashlib.sha256(word.encode()).hexdigest(), 16) % 512] += 1.0
            norm = np.linalg.norm(out[i])
            if norm:
                out[i] /= norm
        return out


def filler(gen: Scripted, index: CardIndex | None = None) -> Filler:
    return Filler(Structured(cast(Generator, gen)), ENGLISH, index)


def turn(message: str, last: TurnRecord | None = None, mode: str = "auto") -> PlanInput:
    return PlanInput(
        message=message,
        mode=mode,
        named_tool="",
        priority=common_pb2.PRIORITY_P1,
        previous_message=last.user_message if last else "",
        previous_answer=last.answer if last else "",
        previous_calls=last.successful_calls() if last else (),
        previous_result=last.single_result() if last else "",
    )


def record(message: str, answer: str, tool: str, arguments: dict[str, Any], output: dict[str, Any]) -> TurnRecord:
    call = ToolRecord("c1", tool, json.dumps(arguments), status=OK, output_json=json.dumps(output))
    return TurnRecord(turn_id="t1", user_message=message, answer=answer, tool_calls=[call])


class Selector:
    """The card index and the similarity judge together: a message's first verdict, with no generation."""

    def __init__(
        self,
        embedder: Any,
        settings: SelectorSettings | None = None,
        no_tool_examples: Sequence[str] = NO_TOOL_EXAMPLES,
    ) -> None:
        self.settings = settings or SelectorSettings()
        self.index = CardIndex(embedder, self.settings, no_tool_examples)
        self.judge = SimilarityJudge(self.settings)
        self._specs: Sequence[common_pb2.ToolSpec] = ()

    async def load(self, specs: Sequence[common_pb2.ToolSpec]) -> None:
        self._specs = specs
        await self.index.load(specs)

    def shares_intent(self, tool: str, text: str) -> bool:
        return self.index.shares_intent(tool, text)

    async def select(self, message: str, *, previous_message: str = "") -> Verdict:
        base = turn(message)
        if previous_message:
            base = PlanInput(message, "auto", "", common_pb2.PRIORITY_P1, previous_message=previous_message)
        if not self.index.loaded:
            return Verdict(Decision.NONE)
        ask = await scored_ask(self.index, self._specs, base, TurnCounters())
        return await advance([self.judge], ask, start(ask))


class FixedIndex:
    """A card index stand-in: examples nearest last as given, intent words as given, nothing to embed."""

    def __init__(self, intents: dict[str, frozenset[str]] | None = None) -> None:
        self.intents = intents or {}
        self.language = ENGLISH
        self.no_tool_examples = list(NO_TOOL_EXAMPLES)
        self.loaded = True
        self.cards = None
        self.asks = None  # no ask classifier: the whether judge passes

    async def load(self, specs: Sequence[common_pb2.ToolSpec]) -> None:
        return None

    def shares_intent(self, tool: str, text: str) -> bool:
        return bool(ENGLISH.content_words(text) & self.intents.get(tool, frozenset()))

    async def nearest(self, text: str, examples: list[tuple[str, Any]], k: int) -> list[tuple[str, Any]]:
        return list(examples[-k:])


class FixedJudge:
    """A similarity judge stand-in whose verdict is always ``verdict``."""

    name = "similarity"

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict

    async def judge(self, ask: Ask, verdict: Verdict) -> Verdict | None:
        return self.verdict


def band(*candidates: str, scores: dict[str, float] | None = None, none_score: float = 0.0) -> FixedJudge:
    """Every message ambiguous between ``candidates``."""
    return FixedJudge(
        Verdict(Decision.AMBIGUOUS, candidates=candidates, scores=dict(scores or {}), none_score=none_score)
    )


def chose(segments: dict[str, str]) -> FixedJudge:
    """Chose the tools of ``segments`` from those clauses (as a two-clause message does)."""
    return FixedJudge(Verdict(Decision.TOOLS, tools=tuple(segments), segments=dict(segments)))


def planner_with(
    gen: Any,
    first: FixedJudge,
    index: Any = None,
    settings: SelectorSettings | None = None,
    judged: tuple[str, float] | None = None,
) -> Planner:
    """A planner whose similarity judge is ``first`` (its verdict carrying ``judged``), over ``index``."""
    if judged is not None:
        from dataclasses import replace

        first = FixedJudge(replace(first.verdict, judged=judged))
    return Planner(
        cast(Generator, gen),
        PlanningSettings(selector=settings or SelectorSettings()),
        index=cast(CardIndex, index or FixedIndex()),
        first_judge=first,
    )
