"""The likelihood judge: the model's reading of which candidate a message was written for orders the band.

Between the judges that need no generation and the LLM judge, which is shown
the best-ranked candidate alone. It decides nothing: it reorders the first
``likelihood_candidates`` candidates of an undecided message (and of each
undecided clause) by their card score plus ``likelihood_weight`` times how
likely the message is, per token, as a request written for that candidate
(``prompts.request_messages``; one scoring per candidate, concurrently, on
the replica: ``scoring.py``), relative to the likeliest. The embedding
ranks a tool it has never seen first for about 60 % of single asks; the
135M model's likelihood alone ranks worse, but the two disagree where the
embedding is wrong. On the turns the earlier judges left to the LLM judge
with one tool expected, over the generality dev split and the six spent
blind sets (``evals/MANIFEST.md``: ranking tuning data), the candidate shown
was the expected one for 72 of 188 by the card score and 97 with the
likelihood added at weight 0.5 (dev alone 10 → 10 of 14).

A scoring that fails leaves the order as it was (logged and counted): the
LLM judge then decides on the card score's order, as without this judge.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace

from services.router.metrics import RouterMetrics, count_selection
from services.router.planning.judges import Ask, Decision, Verdict
from services.router.planning.prompts import request_messages
from services.router.planning.scoring import Scorer
from services.router.planning.settings import SelectorSettings
from services.runtime.errors import AgentMeshError

log = logging.getLogger(__name__)


class LikelihoodJudge:
    name = "likelihood"

    def __init__(self, scorer: Scorer, settings: SelectorSettings, metrics: RouterMetrics | None = None) -> None:
        self._scorer = scorer
        self._settings = settings
        self._metrics = metrics

    async def judge(self, ask: Ask, verdict: Verdict) -> Verdict | None:
        if ask.index is None or self._settings.likelihood_weight <= 0:
            return None
        try:
            if verdict.decision is Decision.AMBIGUOUS and len(verdict.candidates) > 1:
                order = await self.ranked(ask, ask.message, verdict.candidates, verdict.scores)
                return self._counted(verdict, replace(verdict, candidates=order))
            if verdict.decision is Decision.TOOLS and verdict.undecided:
                orders = await asyncio.gather(
                    *(self.ranked(ask, clause, candidates, verdict.scores) for clause, candidates in verdict.undecided)
                )
                undecided = tuple((clause, order) for (clause, _), order in zip(verdict.undecided, orders, strict=True))
                return self._counted(verdict, replace(verdict, undecided=undecided))
        except (AgentMeshError, RuntimeError) as exc:
            log.warning("likelihood judge: scoring failed (%s); the card score's order stands", exc)
            count_selection(self._metrics, self.name, "failed")
        return None

    async def ranked(
        self, ask: Ask, text: str, candidates: Sequence[str], scores: Mapping[str, float]
    ) -> tuple[str, ...]:
        """``candidates`` with the first ``likelihood_candidates`` reordered by card score plus weighted likelihood."""
        head = list(candidates[: self._settings.likelihood_candidates])
        if len(head) < 2:
            return tuple(candidates)
        by_name = {spec.name: spec for spec in ask.specs}
        read = await asyncio.gather(
            *(self._scorer(request_messages(by_name[name]), text, ask.turn.priority, ask.counters) for name in head)
        )
        per_token = [logprob / max(1, tokens) for logprob, tokens in read]
        best = max(per_token)
        weight = self._settings.likelihood_weight
        combined = {name: scores.get(name, 0.0) + weight * (p - best) for name, p in zip(head, per_token, strict=True)}
        return (*sorted(head, key=lambda name: -combined[name]), *candidates[len(head) :])

    def _counted(self, before: Verdict, after: Verdict) -> Verdict:
        changed = after.candidates != before.candidates or after.undecided != before.undecided
        count_selection(self._metrics, self.name, "reordered" if changed else "kept")
        return after


__all__ = ["LikelihoodJudge"]
