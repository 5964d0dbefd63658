"""What a run adds up to, per split and mode: ratios, latencies, generations, how tools were selected."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evals.cases import CATEGORIES
from evals.records import TurnRecord
from evals.scoring import TurnScore, percentile, score_turn


@dataclass
class Report:
    """Every turn record of a run, and the summaries computed from them."""

    modes: tuple[str, ...]
    splits: tuple[str, ...]
    cases: dict[str, int]
    records: list[TurnRecord]

    def select(self, mode: str | None = None, split: str | None = None) -> list[TurnRecord]:
        return [r for r in self.records if (mode is None or r.mode == mode) and (split is None or r.split == split)]

    def turns(self, split: str) -> int:
        """Turns per mode in ``split`` (each mode runs every turn)."""
        return len(self.select(self.modes[0], split)) if self.modes else 0

    def summary(self, mode: str, split: str) -> Summary:
        return summarise(self.select(mode, split))

    def failures(self, split: str) -> list[tuple[TurnRecord, TurnScore]]:
        scored = [(r, score_turn(r)) for r in self.select(split=split)]
        failed = [(r, s) for r, s in scored if s.failed or r.error]
        return sorted(failed, key=lambda rs: (rs[0].case_id, rs[0].turn_index, self.modes.index(rs[0].mode)))


# -------------------------------------------------------------------------------------------- summary


@dataclass(frozen=True)
class Ratio:
    hits: int
    total: int

    @property
    def value(self) -> float | None:
        return self.hits / self.total if self.total else None

    def __str__(self) -> str:
        return f"{self.hits}/{self.total} ({100 * self.hits / self.total:.1f} %)" if self.total else "–"


@dataclass(frozen=True)
class Summary:
    """One mode on one split. Latencies are seconds; None where no turn qualified."""

    turns: int
    errors: int
    tool_choice: Ratio
    #: Turns that need no tool but ran one.
    false_positives: Ratio
    arguments: Ratio
    answers: Ratio
    generations_mean: float | None
    single_tool_generations_mean: float | None
    single_tool_generations_max: int | None
    selection: dict[str, int]
    ttft_client_p50: float | None
    ttft_client_p95: float | None
    ttft_server_p50: float | None
    ttft_server_p95: float | None
    latency_p50: float | None
    latency_p95: float | None
    single_tool_latency_p50: float | None
    planning_p50: float | None
    by_category: dict[str, Ratio]


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarise(records: Sequence[TurnRecord]) -> Summary:
    """Accuracy, cost and latency of a set of turns (those of one mode and split).

    Single-tool turns are those *expected* to call exactly one tool, so both
    modes are measured on the same turns whatever they chose.
    """
    scores = [score_turn(r) for r in records]
    arg_checks = [p for s in scores for _, p in s.args]
    answered = [s.answer_ok for s in scores if s.answer_ok is not None]
    done = [r for r in records if not r.error]
    single = [r for r in done if len(r.expected.tools) == 1]
    ttft_client = [r.ttft_client_s for r in done if r.ttft_client_s is not None]
    ttft_server = [r.ttft_server_s for r in done if r.ttft_server_s is not None]
    latencies = [r.latency_s for r in done if r.latency_s is not None]
    single_latencies = [r.latency_s for r in single if r.latency_s is not None]
    categories: dict[str, list[bool]] = {}
    for r, s in zip(records, scores, strict=True):
        categories.setdefault(r.category, []).append(s.tool_ok)
    return Summary(
        turns=len(records),
        errors=sum(1 for r in records if r.error),
        tool_choice=Ratio(sum(s.tool_ok for s in scores), len(scores)),
        false_positives=Ratio(
            sum(1 for r in records if not r.expected.tools and r.tools_called),
            sum(1 for r in records if not r.expected.tools),
        ),
        arguments=Ratio(sum(p is None for p in arg_checks), len(arg_checks)),
        answers=Ratio(sum(answered), len(answered)),
        generations_mean=_mean([r.generations for r in done]),
        single_tool_generations_mean=_mean([r.generations for r in single]),
        single_tool_generations_max=max((r.generations for r in single), default=None),
        selection=dict(Counter(r.tool_selection for r in done).most_common()),
        ttft_client_p50=percentile(ttft_client, 50),
        ttft_client_p95=percentile(ttft_client, 95),
        ttft_server_p50=percentile(ttft_server, 50),
        ttft_server_p95=percentile(ttft_server, 95),
        latency_p50=percentile(latencies, 50),
        latency_p95=percentile(latencies, 95),
        single_tool_latency_p50=percentile(single_latencies, 50),
        planning_p50=percentile([r.planning_s for r in done if r.planning_s is not None], 50),
        by_category={c: Ratio(sum(v), len(v)) for c, v in sorted(categories.items(), key=_category_order)},
    )


def _category_order(item: tuple[str, Any]) -> int:
    return CATEGORIES.index(item[0]) if item[0] in CATEGORIES else len(CATEGORIES)
