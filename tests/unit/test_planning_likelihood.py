"""The likelihood judge reorders the band's candidates by card score plus the model's likelihood; it decides nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from agentmesh.common.v1 import common_pb2
from services.router.planning.inputs import PlanInput
from services.router.planning.judges import Ask, Decision, Verdict
from services.router.planning.judges.likelihood import LikelihoodJudge
from services.router.planning.scoring import Scorer
from services.router.planning.settings import SelectorSettings
from services.router.turn.progress import TurnCounters
from services.router.turn.prompt import Message
from services.runtime.errors import Unavailable


def spec(name: str, description: str) -> common_pb2.ToolSpec:
    return common_pb2.ToolSpec(name=name, description=description, parameters_json_schema='{"type":"object"}')


SPECS = [
    spec("get_forecast", "The weather forecast."),
    spec("get_current", "The weather now."),
    spec("note", "A note."),
]


class Likelihoods:
    """A scorer with a fixed per-token log-probability per tool (found by its description in the prompt)."""

    def __init__(self, per_token: dict[str, float], fail: bool = False) -> None:
        self.per_token = per_token
        self.fail = fail
        self.asked: list[tuple[str, str]] = []

    async def __call__(
        self, messages: Sequence[Message], continuation: str, priority: Any, counters: TurnCounters
    ) -> tuple[float, int]:
        if self.fail:
            raise Unavailable("no inference replica is available")
        tool = next(s.name for s in SPECS if s.description in messages[0].content)
        self.asked.append((tool, continuation))
        return self.per_token[tool] * 4, 4


def ask(message: str) -> Ask:
    turn = PlanInput(message, "auto", "", common_pb2.PRIORITY_P1, "", "", ())
    return Ask(turn, SPECS, TurnCounters(), index=cast(Any, object()))


def judge(scorer: Likelihoods, **settings: Any) -> LikelihoodJudge:
    return LikelihoodJudge(cast(Scorer, scorer), SelectorSettings(**settings))


async def test_the_likelier_request_moves_a_close_second_first_and_a_far_one_stays() -> None:
    scorer = Likelihoods({"get_forecast": -1.0, "get_current": -2.0, "note": -0.9})
    scores = {"get_current": 0.60, "get_forecast": 0.58, "note": 0.20}
    band = Verdict(Decision.AMBIGUOUS, candidates=("get_current", "get_forecast", "note"), scores=scores)
    ruled = await judge(scorer, likelihood_weight=0.5).judge(ask("rain tomorrow?"), band)
    assert ruled is not None and ruled.decision is Decision.AMBIGUOUS  # it decides nothing
    # forecast 0.58 - 0.05, current 0.60 - 0.55, note 0.20 - 0: the note is likeliest, too far by the cards
    assert ruled.candidates == ("get_forecast", "note", "get_current")
    assert {tool for tool, _ in scorer.asked} == {"get_forecast", "get_current", "note"}


async def test_only_the_first_candidates_are_scored_and_weight_zero_is_off() -> None:
    scorer = Likelihoods({"get_forecast": -1.0, "get_current": -3.0, "note": -1.0})
    band = Verdict(Decision.AMBIGUOUS, candidates=("get_current", "get_forecast", "note"), scores={})
    ruled = await judge(scorer, likelihood_candidates=2).judge(ask("rain?"), band)
    assert ruled is not None and ruled.candidates == ("get_forecast", "get_current", "note")
    assert len(scorer.asked) == 2
    assert await judge(scorer, likelihood_weight=0.0).judge(ask("rain?"), band) is None


async def test_a_decided_verdict_passes_and_an_undecided_clause_is_reordered() -> None:
    scorer = Likelihoods({"get_forecast": -1.0, "get_current": -3.0, "note": -2.0})
    decided = Verdict(Decision.TOOLS, tools=("note",))
    assert await judge(scorer).judge(ask("take a note"), decided) is None and scorer.asked == []
    clause = ("and rain tomorrow?", ("get_current", "get_forecast"))
    with_clause = Verdict(Decision.TOOLS, tools=("note",), undecided=(clause,), scores={"get_current": 0.5})
    ruled = await judge(scorer).judge(ask("take a note and rain tomorrow?"), with_clause)
    assert ruled is not None and ruled.undecided == (("and rain tomorrow?", ("get_forecast", "get_current")),)
    assert {text for _, text in scorer.asked} == {"and rain tomorrow?"}


async def test_a_failed_scoring_leaves_the_card_order() -> None:
    band = Verdict(Decision.AMBIGUOUS, candidates=("get_current", "get_forecast"), scores={})
    assert await judge(Likelihoods({}, fail=True)).judge(ask("rain?"), band) is None
