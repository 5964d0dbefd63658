"""The similarity judge: the first verdict, from the message's card scores and the tools' intent words.

How a text is decided (seed 002 §3.3: a cheap pre-judge, thresholds with a
margin, the model only for the band):

- Scores. Per tool, the text's similarity to the tool's nearest positive card,
  and a "not this tool" score: its similarity to the nearest of that tool's
  near misses and the no-tool examples. A tool's near misses count only
  against that tool: they often are another tool's business.
- A text *chooses* its best tool when the score is at least ``choose`` (for a
  tool described only, ``described_choose``), it is not overruled by the
  "not this tool" side by ``overrule``, and the text shares one of the tool's
  intent words (the lexical double-check; without one the text is
  ambiguous). The two judges agreeing is the evidence, so the lead over "not
  this tool" need not be wide.
- A tool described only (no example requests: its card is its name and
  description) whose text shares no intent word is still chosen when it
  scores ``described_choose`` and leads every other tool by ``described_lead``.
- A text needs *no tool* when every tool scores below its own ``reject`` (or
  ``described_reject``), or the "not this tool" side beats the best by
  ``margin``. Anything else is *ambiguous*.
- A question about a concept (``Language.asks_knowledge``: "why do airlines
  overbook flights?") is never chosen on nearness alone: its topic words are
  what brought it near a tool, so it goes to the band; asked anywhere in the
  message, it holds for every clause of it (split at "and", the difference
  between "a tornado watch" and "a tornado warning" left a clause that read
  as an alert's ask: 11 of the spent sets' turns decided wrong). Nor is a text whose
  opening verb contradicts what a described tool's name does (a question
  reads; ``create_ticket`` creates): the band weighs that.
- Several asks. The message's clauses (the language splits them) are decided
  one by one too; the chosen tools are the union, each remembering the clause
  that asked for it. Once a clause has chosen, the whole message's choice joins
  only when it is some clause's best tool (the whole is a blend of the asks).
  A clause does not choose on its own when the whole message needs no tool
  ("Book hotel H-55012 for 2026-08-01 to 2026-08-04, | 3 guests": the count
  is near the arithmetic tool's examples); it is left to the band.
- Follow-ups. A message undecided on its own ("And in Paris?") is decided
  again together with the previous user message; one that is itself near a
  no-tool example ("Thanks!") is not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from services.router.metrics import RouterMetrics, count_selection
from services.router.planning.candidates import Cards, TextScore
from services.router.planning.judges import Ask, Decision, Verdict
from services.router.planning.settings import SelectorSettings


@dataclass(frozen=True)
class _TextVerdict:
    decision: Decision
    chosen: list[str]
    scores: dict[str, float]
    none_score: float


def _undecided(verdict: _TextVerdict) -> _TextVerdict:
    return _TextVerdict(Decision.AMBIGUOUS, [], verdict.scores, verdict.none_score)


class SimilarityJudge:
    """Thresholds on the card scores, checked by the intent words (``candidates.CardIndex`` scores)."""

    name = "similarity"

    def __init__(self, settings: SelectorSettings, metrics: RouterMetrics | None = None) -> None:
        self._settings = settings
        self._metrics = metrics

    async def judge(self, ask: Ask, verdict: Verdict) -> Verdict | None:
        index = ask.index
        cards = index.cards if index is not None else None
        if index is None or cards is None or not cards.tools or not ask.scored:
            return Verdict(Decision.NONE, by=self.name)
        parts = list(ask.clauses)
        texts = list(ask.scored)
        # A concept asked about anywhere in the message holds for its clauses: "the difference between a tornado
        # watch | and a tornado warning" is split at "and", and its second clause alone reads as an alert's ask.
        asked = index.language.asks_knowledge(ask.message)
        verdicts = [self._decide(cards, t, asked or index.language.asks_knowledge(t.text)) for t in texts]
        whole = verdicts[0]
        clause_verdicts = verdicts[1 : 1 + len(parts)]
        if ask.follow_up and verdicts[-1].decision is Decision.TOOLS and self._open(whole):
            whole = verdicts[-1]
        scores = dict(whole.scores)
        for v in clause_verdicts:
            for name, score in v.scores.items():
                scores[name] = max(scores.get(name, 0.0), score)
        if whole.decision is Decision.NONE:
            # A message that as a whole needs no tool is not a tool's ask for one clause near it: "3 guests", cut
            # from a hotel booking, is near the arithmetic tool's examples. The band decides such a clause.
            clause_verdicts = [_undecided(v) if v.decision is Decision.TOOLS else v for v in clause_verdicts]
        segments: dict[str, str] = {}
        for part, v in zip(parts, clause_verdicts, strict=True):
            for name in v.chosen:
                segments.setdefault(name, part)
        # Asks the clauses decided outrank the whole message's blend of them: its choice stands beside theirs
        # only when it is some clause's best tool (the whole of "is payments-api up in production and who's on
        # call for payments?" was nearest a flight's status, neither clause's).
        tops = {max(v.scores, key=v.scores.__getitem__) for v in clause_verdicts if v.scores}
        for name in whole.chosen:
            if not segments or name in tops:
                segments.setdefault(name, ask.message)
        ruled = self._ruled(ask, cards, parts, clause_verdicts, whole, scores, segments)
        count_selection(self._metrics, "embedding", ruled.decision.value)
        return ruled

    def _ruled(  # noqa: PLR0917 - private, one caller
        self,
        ask: Ask,
        cards: Cards,
        parts: Sequence[str],
        clause_verdicts: Sequence[_TextVerdict],
        whole: _TextVerdict,
        scores: dict[str, float],
        segments: dict[str, str],
    ) -> Verdict:
        if segments:
            chosen = sorted(segments, key=lambda n: -scores.get(n, 0.0))[: self._settings.max_tools]
            undecided = tuple(
                (part, candidates)
                for part, v in zip(parts, clause_verdicts, strict=True)
                if v.decision is Decision.AMBIGUOUS
                and max(v.scores, key=lambda n: v.scores[n]) not in chosen  # else: more words of the same ask
                and (candidates := self._candidates(cards, v.scores, exclude=chosen))
                and not any(segments.get(n) == part for n in chosen)
            )
            if len(chosen) == 1:
                # One tool chosen: it fills from the whole message. A clause left undecided may be more of the
                # same ask ("If I save $15 a week, | how much will I have after 12 weeks?").
                segments = {chosen[0]: ask.message}
            return Verdict(
                Decision.TOOLS,
                tools=tuple(chosen),
                segments={n: segments[n] for n in chosen},
                undecided=undecided,
                scores=scores,
                none_score=whole.none_score,
                by=self.name,
            )
        if whole.decision is Decision.NONE and all(v.decision is Decision.NONE for v in clause_verdicts):
            return Verdict(Decision.NONE, scores=scores, none_score=whole.none_score, by=self.name)
        candidates = self._candidates(cards, scores)
        if not candidates:
            return Verdict(Decision.NONE, scores=scores, none_score=whole.none_score, by=self.name)
        index = ask.index
        judged = index.classify(ask.scored[0].vector) if index is not None else ("", 0.0)
        return Verdict(
            Decision.AMBIGUOUS,
            candidates=candidates,
            scores=scores,
            none_score=whole.none_score,
            judged=judged,
            by=self.name,
        )

    def _open(self, verdict: _TextVerdict) -> bool:
        """Undecided, or "no tool" only for scoring low: not a message that is itself near a no-tool
        example ("Thanks!"), which stays no tool whatever came before."""
        if verdict.decision is Decision.TOOLS:
            return False
        best = max(verdict.scores.values(), default=0.0)
        return verdict.none_score - best < self._settings.margin

    def _candidates(self, cards: Cards, scores: dict[str, float], exclude: Sequence[str] = ()) -> tuple[str, ...]:
        """Tools worth asking the band's judges about: above their ``reject``, best first."""
        s = self._settings
        rejects = dict(zip(cards.tools, self._rejects(cards), strict=True))
        eligible = [n for n in scores if n not in exclude and scores[n] >= rejects.get(n, s.reject)]
        return tuple(sorted(eligible, key=lambda n: -scores[n])[: s.max_tools])

    def _rejects(self, cards: Cards) -> npt.NDArray[np.float64]:
        """Each tool's own ``reject``: ``described_reject`` for a tool described only."""
        return np.where(cards.described, self._settings.described_reject, self._settings.reject)

    def _decide(self, cards: Cards, scored: TextScore, knowledge: bool) -> _TextVerdict:
        """One text's verdict; a text that asks about a concept (``knowledge``) is never chosen for a tool on
        nearness alone: its topic words are what brought it near, and the band's judges decide it. Nor is a text
        whose opening verb does another kind of thing than the tool's name says ("are there open tickets about
        SSO?" near ``create_ticket``): over the spent blind sets 2-14, 7 fewer turns decided wrong, 1 more right."""
        verdict = self._near(cards, scored)
        if verdict.decision is Decision.TOOLS and (knowledge or scored.contradicted[cards.index(verdict.chosen[0])]):
            return _undecided(verdict)
        return verdict

    def _near(self, cards: Cards, scored: TextScore) -> _TextVerdict:
        s = self._settings
        words = scored.words
        per_tool = scored.per_tool
        negative_sims = scored.negatives
        scores = {name: round(float(per_tool[i]), 4) for i, name in enumerate(cards.tools)}
        best_index = int(per_tool.argmax())
        best = float(per_tool[best_index])
        described = bool(cards.described[best_index])
        # Capability asks stand against the tools that bring examples: a tool described only has no examples
        # tuned against the asks it does not serve, and its own asks are among them.
        generic = cards.negative_owner == -1 if described else cards.negative_owner < 0
        no_tool = float(negative_sims[generic].max()) if generic.any() else -1.0
        choose = s.described_choose if described else s.choose
        mine = cards.negative_owner == best_index
        against = max(no_tool, float(negative_sims[mine].max()) if mine.any() else -1.0)
        # One ask per text: a second tool scoring high on the same text is confusion, not a second ask.
        if best >= choose and against - best < s.overrule:
            intents = cards.intents[best_index] if cards.intents else frozenset()
            if not intents or words & intents:
                # Judged in intent as well as in topic: a negative that shares none of the tool's intent words
                # is near in topic only, and does not stand against an ask that does.
                rivals = (generic | mine) & cards.rivals[best_index] if intents else generic | mine
                if best > (float(negative_sims[rivals].max()) if rivals.any() else -1.0):
                    return _TextVerdict(Decision.TOOLS, [cards.tools[best_index]], scores, against)
            elif described and best > against and best - self._runner_up(per_tool, best_index) >= s.described_lead:
                # A card of a name and a description holds few words to share; far ahead of every other tool,
                # the embedding alone is evidence enough.
                return _TextVerdict(Decision.TOOLS, [cards.tools[best_index]], scores, against)
            elif best > against:
                return _TextVerdict(Decision.AMBIGUOUS, [], scores, against)  # near in topic, not in intent
        # Below reject means below every tool's own: a described tool just under a tool with examples is not out.
        if not (per_tool >= self._rejects(cards)).any() or against - best >= s.margin:
            return _TextVerdict(Decision.NONE, [], scores, against)
        return _TextVerdict(Decision.AMBIGUOUS, [], scores, against)

    @staticmethod
    def _runner_up(per_tool: npt.NDArray[np.float32], best_index: int) -> float:
        """The second-best tool's score (-1 when there is one tool)."""
        if len(per_tool) < 2:
            return -1.0
        others = np.delete(per_tool, best_index)
        return float(others.max())


__all__ = ["SimilarityJudge"]
