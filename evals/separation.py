"""Whether the card scores tell a false positive from a right decision: ``python -m evals.stages --separation``.

The judges that need no generation decide most turns, and a tool they choose
for a turn that needs none is a false positive no later judge sees. Before
another threshold is tuned, this reads whether any score the similarity
judge has could tell those turns from the ones it decided right: per score,
the AUC (the chance that a right decision scores above a false positive;
0.5 is no signal) and how many of each fall below a few cut points. Tools
with examples and tools described only are read apart, since their
thresholds are apart. Counts only, so it may run on a held-out split.

What it showed over the spent blind sets 2-9 (EVAL.md, "Per stage"): with
the catalog loaded the near misses look like asks to every card score (AUC
0.54-0.60 for described tools) but not to the ask classifier, which reads
the message alone (``services/router/planning/asks.py``; read with the
whether judge off, ``--set whether_floor=0``); with the catalog not loaded
the built-ins taken for catalog prompts separate by their best card score
and by their lead over the "not this tool" side (AUC 0.95 each).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from services.router.planning.judges import Decision, Verdict


@dataclass(frozen=True)
class Judged:
    """A turn's verdict after the no-generation judges, the tools it expects, and how likely the ask classifier
    reads its message as an ask (the best of its scored texts; 1.0 where no classifier is fitted)."""

    verdict: Verdict
    expected: frozenset[str]
    asks: float = 1.0


def _best(judged: Judged) -> float:
    return judged.verdict.scores.get(judged.verdict.tools[0], 0.0)


def _lead(judged: Judged) -> float:
    ranked = sorted(judged.verdict.scores.values(), reverse=True)
    return ranked[0] - ranked[1] if len(ranked) > 1 else ranked[0]


#: Each score of a decided turn — the similarity judge's, and the ask classifier's — and the cuts to count below.
SCORES: dict[str, tuple[Callable[[Judged], float], tuple[float, ...]]] = {
    "best card score": (_best, (0.5, 0.55, 0.6, 0.65)),
    "lead over the runner-up": (_lead, (0.02, 0.05, 0.08, 0.1)),
    'lead over "not this tool"': (lambda j: _best(j) - j.verdict.none_score, (-0.1, 0.0, 0.05, 0.1)),
    "the ask classifier": (lambda j: j.asks, (0.05, 0.1, 0.2, 0.5)),
}


@dataclass(frozen=True)
class Split:
    """The decided turns of one kind of tool: a tool for a turn that needs none, and the right decisions."""

    kind: str
    false_positives: tuple[Judged, ...]
    right: tuple[Judged, ...]


def auc(negatives: Sequence[float], positives: Sequence[float]) -> float:
    """The chance that a positive scores above a negative (ties count half); 0.5 with either side empty."""
    if not negatives or not positives:
        return 0.5
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))


def splits(judged: Sequence[Judged], described: Collection[str]) -> list[Split]:
    """The turns decided with a tool by the no-generation judges, by the kind of the first tool chosen."""
    out = []
    for kind, is_described in (("tools with examples", False), ("tools described only", True)):
        decided = [
            j
            for j in judged
            if j.verdict.settled
            and j.verdict.decision is Decision.TOOLS
            and (j.verdict.tools[0] in described) is is_described
        ]
        false_positives = tuple(j for j in decided if not j.expected)
        right = tuple(j for j in decided if j.expected == frozenset(j.verdict.tools))
        out.append(Split(kind, false_positives, right))
    return out


def _count(values: Sequence[float], cut: float) -> str:
    return f"{sum(x < cut for x in values)}/{len(values)}"


def separation_table(judged: Sequence[Judged], described: Collection[str]) -> str:
    """Per kind of tool and per score: the AUC, and below each cut how many false positives vs right decisions."""
    lines = ["| tools | score | AUC | below each cut: false positives vs right |", "|---|---|---|---|"]
    for split in splits(judged, described):
        fp, right = split.false_positives, split.right
        if not fp and not right:
            continue
        for name, (score, cuts) in SCORES.items():
            negatives, positives = [score(v) for v in fp], [score(v) for v in right]
            below = "; ".join(f"{cut:+.2f}: {_count(negatives, cut)} vs {_count(positives, cut)}" for cut in cuts)
            lines.append(f"| {split.kind} | {name} | {auc(negatives, positives):.2f} | {below} |")
    return "\n".join(lines)


__all__ = ["SCORES", "Judged", "Split", "auc", "separation_table", "splits"]
