"""The whether judge: a tool described only is not chosen, nor left to the band, for a message that asks nothing."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pytest

from agentmesh.common.v1 import common_pb2
from services.router.planning import Planner, PlanningSettings, SelectorSettings, asks
from services.router.planning.asks import AskClassifier, shared
from services.router.planning.embedding import MiniLmEmbedder
from services.router.planning.inputs import PlanInput
from services.router.planning.judges import Ask, Decision, Verdict
from services.router.planning.judges.whether import WhetherJudge
from services.router.replicas.generation import Generator
from services.router.turn.progress import TurnCounters
from services.runtime.language import ENGLISH
from services.tools.builtin import default_tools
from services.tools.convert import spec_to_proto
from tests.support.planning import BagOfWords, Scripted, turn
from tests.unit.test_planning_generic import FORECAST, TICKET


def ask_with(probability: float, tools: dict[str, bool]) -> Ask:
    """An ask whose one scored text the ask classifier gives ``probability``; ``tools``: name -> described only."""
    names = list(tools)
    cards = SimpleNamespace(tools=names, described=np.asarray(list(tools.values())), index=names.index)
    asks = SimpleNamespace(best=lambda vectors: probability)
    index = SimpleNamespace(cards=cards, asks=asks)
    turn_ = PlanInput("a message", "auto", "", common_pb2.PRIORITY_P1, "", "", ())
    return Ask(turn_, [], TurnCounters(), cast(Any, index), (cast(Any, SimpleNamespace(vector=None)),))


TOOLS = {"get_forecast": True, "calculator_like": False}
DECIDED = Verdict(Decision.TOOLS, tools=("get_forecast",), by="similarity")
BAND = Verdict(Decision.AMBIGUOUS, candidates=("get_forecast", "calculator_like"))


async def test_a_described_tool_decided_or_first_in_the_band_is_no_tool_for_a_message_that_asks_nothing() -> None:
    judge = WhetherJudge(SelectorSettings(whether_floor=0.1))
    for verdict in (DECIDED, BAND):
        ruled = await judge.judge(ask_with(0.05, TOOLS), verdict)
        assert ruled is not None and ruled.decision is Decision.NONE and ruled.by == "whether"
        assert ruled.tools == () and ruled.candidates == ()
        assert await judge.judge(ask_with(0.2, TOOLS), verdict) is None  # it asks: the verdict stands


async def test_tools_with_examples_a_schema_proof_and_a_floor_of_zero_are_left_alone() -> None:
    judge = WhetherJudge(SelectorSettings(whether_floor=0.1))
    with_examples = Verdict(Decision.TOOLS, tools=("calculator_like",), by="similarity")
    first_with_examples = Verdict(Decision.AMBIGUOUS, candidates=("calculator_like", "get_forecast"))
    proven = Verdict(Decision.TOOLS, tools=("get_forecast",), by="schema")
    mixed = Verdict(Decision.TOOLS, tools=("get_forecast", "calculator_like"), by="similarity")
    for verdict in (with_examples, first_with_examples, proven, mixed, Verdict(Decision.NONE)):
        assert await judge.judge(ask_with(0.0, TOOLS), verdict) is None, verdict
    off = WhetherJudge(SelectorSettings(whether_floor=0))
    assert await off.judge(ask_with(0.0, TOOLS), DECIDED) is None


@pytest.fixture(scope="module")
def embedder() -> MiniLmEmbedder:
    return MiniLmEmbedder()


async def test_the_ask_classifier_learns_from_the_languages_examples_and_is_fitted_once(
    embedder: MiniLmEmbedder,
) -> None:
    examples = ENGLISH.ask_examples()
    assert len(examples) >= 800 and 0.4 < sum(asks for _, asks in examples) / len(examples) < 0.6
    classifier = await shared(examples, embedder, embedder.embed)
    assert await shared(examples, embedder, embedder.embed) is classifier  # every card index reuses it
    asks = ["cancel my dentist appointment on thursday", "is the staging database up right now?"]
    chat = ["what's the difference between a stock and a bond?", "write a short poem about autumn"]
    vectors = await embedder.embed([*asks, *chat])
    p = [classifier.probability(v) for v in vectors]
    assert min(p[:2]) > 0.5 and max(p[2:]) < 0.1, p
    assert classifier.best(vectors) == max(p) and classifier.best([]) == 1.0  # one text that asks: the message asks


async def test_a_described_tool_near_a_message_that_asks_nothing_costs_no_generation(
    embedder: MiniLmEmbedder,
) -> None:
    specs = [*(spec_to_proto(t) for t in default_tools()), FORECAST, TICKET]
    near_miss = "what makes a good bug ticket title?"  # near create_ticket's description, and asks for nothing
    chosen = []
    for floor in (0.0, 0.1):
        gen = Scripted('{"title":"bug ticket title"}')
        chain = PlanningSettings(
            judges=("similarity", "schema", "classifier", "whether"), selector=SelectorSettings(whether_floor=floor)
        )
        planner = Planner(cast(Generator, gen), chain, embedder)
        await planner.prepare(specs)
        plan = await planner.plan(specs, turn(near_miss), TurnCounters())
        chosen.append(([c.name for c in plan.calls], len(gen.asked)))
    assert chosen == [(["create_ticket"], 1), ([], 0)]


async def test_the_ask_classifier_is_fitted_only_when_the_chain_has_the_whether_judge() -> None:
    without = Planner(cast(Generator, Scripted()), PlanningSettings(judges=("similarity",)), BagOfWords())
    await without.prepare([FORECAST])
    assert without.index is not None and without.index.asks is None
    with_it = Planner(cast(Generator, Scripted()), PlanningSettings(judges=("similarity", "whether")), BagOfWords())
    await with_it.prepare([FORECAST])
    assert with_it.index is not None and isinstance(with_it.index.asks, AskClassifier)


async def test_the_fitted_classifier_is_kept_on_disk_for_every_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTMESH_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(asks, "_FITTED", {})
    embedder = BagOfWords()
    examples = [("cancel my order 12", True), ("tell me a joke", False), ("is the db up", True), ("hello", False)]
    first = await shared(examples, embedder, embedder.embed)
    [kept] = (tmp_path / "asks").glob("*.npz")
    monkeypatch.setattr(asks, "_FITTED", {})  # another process: nothing in memory
    calls = len(embedder.calls)
    again = await shared(examples, embedder, embedder.embed)
    assert len(embedder.calls) == calls  # read, not embedded and fitted again
    assert np.array_equal(again.classifier.weights, first.classifier.weights)
    kept.write_bytes(b"torn")  # an unreadable file is fitted again and written over
    monkeypatch.setattr(asks, "_FITTED", {})
    refitted = await shared(examples, embedder, embedder.embed)
    assert np.array_equal(refitted.classifier.weights, first.classifier.weights)
    assert len(embedder.calls) == calls + 1 and kept.read_bytes() != b"torn"
