"""The separation table reads whether the card scores tell a false positive from a right decision."""

from __future__ import annotations

from evals.separation import Judged, auc, separation_table, splits
from services.router.planning.judges import Decision, Verdict


def decided(tool: str, best: float, against: float) -> Verdict:
    scores = {tool: best, "other": 0.1}
    return Verdict(Decision.TOOLS, tools=(tool,), scores=scores, none_score=against, by="similarity")


def test_auc_is_the_chance_a_right_decision_scores_above_a_false_positive() -> None:
    assert auc([0.1, 0.2], [0.3, 0.4]) == 1.0
    assert auc([0.3, 0.4], [0.1, 0.2]) == 0.0
    assert auc([0.2], [0.2]) == 0.5
    assert auc([], [0.3]) == 0.5


def test_decided_turns_split_by_kind_of_tool_and_by_whether_a_tool_was_wanted() -> None:
    judged = [
        Judged(decided("calc", 0.6, 0.7), frozenset(), asks=0.02),  # a tool for a turn that wants none
        Judged(decided("calc", 0.7, 0.4), frozenset({"calc"}), asks=0.9),  # right
        Judged(decided("calc", 0.7, 0.4), frozenset({"clock"})),  # wrong tool: neither side
        Judged(decided("weather", 0.6, 0.3), frozenset({"weather"})),
        Judged(Verdict(Decision.AMBIGUOUS, candidates=("calc",)), frozenset()),  # left to the band: not decided
    ]
    with_examples, described = splits(judged, described={"weather"})
    assert (len(with_examples.false_positives), len(with_examples.right)) == (1, 1)
    assert (len(described.false_positives), len(described.right)) == (0, 1)
    table = separation_table(judged, described={"weather"})
    # the false positive's lead over "not this tool" is -0.1, the right one's +0.3: fully apart
    assert '| tools with examples | lead over "not this tool" | 1.00 | -0.10: 0/1 vs 0/1; +0.00: 1/1 vs 0/1;' in table
    # and the ask classifier reads the false positive's message as no ask (0.02), the right one's as one (0.9)
    assert "| tools with examples | the ask classifier | 1.00 | +0.05: 1/1 vs 0/1; +0.10: 1/1 vs 0/1;" in table
