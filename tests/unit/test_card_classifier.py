"""The card classifier (the band's second opinion) and how planning lets a confident verdict decide the band."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pytest

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from services.router.planning.card_classifier import CardClassifier
from services.router.planning.embedding import Vectors
from services.router.planning.inputs import PlanInput
from services.router.planning.judges import Ask, Decision, Verdict
from services.router.planning.judges.classifier import ClassifierJudge
from services.router.planning.settings import SelectorSettings
from services.router.turn.progress import TurnCounters
from services.tools.builtin import clock
from services.tools.convert import spec_to_proto
from tests.support.planning import BagOfWords, Selector, band, planner_with
from tests.unit.test_tool_selection import NO_TOOL, SPECS


def _unit(rows: list[list[float]]) -> Vectors:
    x = np.asarray(rows, dtype=np.float32)
    unit: Vectors = x / np.linalg.norm(x, axis=1, keepdims=True)
    return unit


def test_the_classifier_is_sure_deep_in_a_class_and_unsure_between_classes() -> None:
    # Class 0's cards lean on axis 0, class 1 ("no tool") on axis 1; axis 2 is noise both share.
    cards = _unit([[1, 0, 0.9], [1, 0.2, -0.9], [0.9, 0, 0.1], [0, 1, 0.9], [0.2, 1, -0.9], [0, 0.9, 0.1]])
    labels = np.asarray([0, 0, 0, 1, 1, 1])
    fitted = CardClassifier.fit(cards, labels, 2)
    assert fitted.none_class == 1
    deep, between = _unit([[1, 0.05, 0.5]])[0], _unit([[0.5, 0.45, 0.5]])[0]
    label, sure = fitted.predict(deep)
    assert label == 0 and sure > 0.9
    assert fitted.predict(_unit([[0.05, 1, -0.5]])[0])[0] == 1
    assert 0.5 <= fitted.predict(between)[1] < sure
    again = CardClassifier.fit(cards, labels, 2)
    assert np.array_equal(again.weights, fitted.weights)  # deterministic: the same cards, the same weights


async def test_the_selector_judges_an_ambiguous_message_with_the_classifier_fitted_on_its_cards() -> None:
    s = Selector(BagOfWords(), SelectorSettings(choose=0.9, reject=0.1, margin=0.05), NO_TOOL)
    await s.load(SPECS)
    selection = await s.select("is the weather nice")
    assert selection.decision is Decision.AMBIGUOUS
    assert selection.judged[0] == "weather" and 0.5 < selection.judged[1] <= 1.0


def test_band_confidence_is_off_or_a_probability_above_one_half() -> None:
    assert SelectorSettings(band_confidence=0).band_confidence == 0
    for bad in (0.3, 1.5, -1.0):
        with pytest.raises(ValueError, match="band-confidence"):
            SelectorSettings(band_confidence=bad)


def _judged(judged: tuple[str, float], confidence: float = 0.9) -> object:
    """A planner whose band verdict is fixed: ambiguous between the clock and no tool, judged as given."""
    return planner_with(
        _NoModel(),
        band("clock", scores={"clock": 0.4}, none_score=0.39),
        settings=SelectorSettings(band_confidence=confidence),
        judged=judged,
    )


class _NoModel:
    async def stream(self, spec: object) -> AsyncIterator[object]:
        raise AssertionError("no generation expected")
        yield


ASK = PlanInput("Would my sister in Seoul be having dinner around now?", "auto", "", common_pb2.PRIORITY_P1)


async def test_a_confident_verdict_decides_the_band_with_no_generation() -> None:
    specs = [spec_to_proto(clock.make_tool())]
    tool = cast(Any, _judged(("clock", 0.95)))
    plan = await tool.plan(specs, ASK, TurnCounters())
    # The clock's place is copied from the message (one place, one choice): filled with no generation either.
    assert [(c.name, c.arguments) for c in plan.calls] == [("clock", {"timezone": "Seoul"})]
    assert plan.method == agent_pb2.TOOL_SELECTION_EMBEDDING
    none = cast(Any, _judged(("", 0.97)))
    plan = await none.plan(specs, ASK, TurnCounters())
    assert plan.calls == [] and plan.method == agent_pb2.TOOL_SELECTION_EMBEDDING


@pytest.mark.parametrize(
    ("judged", "confidence"),
    [
        (("clock", 0.7), 0.9),  # unsure
        (("clock", 0.95), 0),  # the judge is off
        (("kb_search", 0.99), 0.9),  # sure of a tool that is not a candidate
    ],
)
async def test_an_unsure_or_off_verdict_leaves_the_band_to_the_generation(
    judged: tuple[str, float], confidence: float
) -> None:
    specs = [spec_to_proto(clock.make_tool())]
    planner = cast(Any, _judged(judged, confidence))
    with pytest.raises(AssertionError, match="no generation expected"):
        await planner.plan(specs, ASK, TurnCounters())


def _ask_with_words(words: frozenset[str]) -> Ask:
    """An ask whose one scored text has the ask words ``words``, over a clock with intent word "time" and a tool
    with no intent words."""
    intents = {"clock": frozenset({"time"}), "plain": frozenset[str]()}
    cards = SimpleNamespace(tools=list(intents), intents_of=intents.__getitem__)
    index = SimpleNamespace(cards=cards)
    return Ask(ASK, [], TurnCounters(), cast(Any, index), (cast(Any, SimpleNamespace(words=words)),))


async def test_a_confident_tool_verdict_needs_one_of_the_tools_intent_words() -> None:
    """The classifier reads the same vectors as the card scores: it is no second judge of a tool the message
    shares no intent word with ("is BA 287 on time?" is not a clock's ask for its "time"; "book it for those dates"
    has no word of one), so that band goes on to the generation."""
    judge = ClassifierJudge(SelectorSettings(band_confidence=0.75))
    verdict = Verdict(Decision.AMBIGUOUS, candidates=("clock", "plain"), judged=("clock", 0.95))
    assert await judge.judge(_ask_with_words(frozenset({"flight", "late"})), verdict) is None
    shared = await judge.judge(_ask_with_words(frozenset({"time", "seoul"})), verdict)
    assert shared is not None and shared.tools == ("clock",) and shared.by == "classifier"
    plain = replace(verdict, judged=("plain", 0.95))  # a tool with no intent words: no evidence either way
    assert (await judge.judge(_ask_with_words(frozenset({"flight"})), plain)).tools == ("plain",)  # type: ignore[union-attr]
    none = replace(verdict, judged=("", 0.95))  # "no tool" needs no word
    assert (await judge.judge(_ask_with_words(frozenset()), none)).decision is Decision.NONE  # type: ignore[union-attr]
