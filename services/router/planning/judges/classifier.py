"""The classifier judge: the card classifier's confident verdict decides an undecided message.

The similarity judge leaves a band of messages whose best tool is neither
clearly near nor clearly far. The card classifier (``card_classifier.py``),
fitted on every card of the tool list, classified the whole message while it
was scored (``Verdict.judged``); when its probability reaches
``band_confidence`` and it names a candidate, or no tool, that is the
verdict, with no generation. Unsure, or naming a tool that is not a
candidate, it passes.

A tool's verdict also needs one of the tool's intent words in the message
(the similarity judge's lexical double-check): the classifier reads the same
vectors as the card scores, so on its own it is no second judge. With the
catalog not loaded, its tool verdicts over the spent blind sets had been 23
wrong to 70 right overall, the wrong ones asks for other things near a
built-in in topic only ("is BA 287 on time?", "book offer KY-5531 for those
dates"); such a band goes on to the generation.
"""

from __future__ import annotations

from dataclasses import replace

from services.router.metrics import RouterMetrics, count_selection
from services.router.planning.judges import Ask, Decision, Verdict
from services.router.planning.settings import SelectorSettings


class ClassifierJudge:
    name = "classifier"

    def __init__(self, settings: SelectorSettings, metrics: RouterMetrics | None = None) -> None:
        self._confidence = settings.band_confidence
        self._metrics = metrics

    async def judge(self, ask: Ask, verdict: Verdict) -> Verdict | None:
        if verdict.decision is not Decision.AMBIGUOUS or self._confidence <= 0:
            return None
        name, probability = verdict.judged
        if probability < self._confidence or (name and name not in verdict.candidates):
            return None
        if name and not _shares_intent(ask, name):
            return None
        count_selection(self._metrics, "embedding", "classified")
        if not name:
            return replace(verdict, decision=Decision.NONE, candidates=(), by=self.name)
        return replace(verdict, decision=Decision.TOOLS, tools=(name,), segments={}, candidates=(), by=self.name)


def _shares_intent(ask: Ask, tool: str) -> bool:
    """Whether one of the message's texts shares an intent word of ``tool`` (True for a tool with none)."""
    cards = ask.index.cards if ask.index is not None else None
    intents = cards.intents_of(tool) if cards is not None else frozenset()
    return not intents or any(text.words & intents for text in ask.scored)
