"""The whether judge: a tool described only is not chosen for a message that asks for nothing a tool does.

A tool that brings only a name and a description is chosen, or ranked first
for the band, by how near the message comes to its description; a near miss
("should I use folders or labels for my mail?") comes as near as an ask, and
no card score tells them apart. Whether a message asks for a lookup or an
action at all is a property of the message, not of any tool: the ask
classifier (``asks.py``) reads it from the message's vectors, learnt once from
the language's labelled examples.

So, after the judges that need no generation: a verdict for tools described
only — decided by nearness (not by ``schema``, whose proof is the message's
own values), or a band whose first candidate is one — becomes "no tool" when
none of the message's scored texts (the message, its clauses, its follow-up
text) asks with probability ``whether_floor``. The band's message then costs
no scoring and no generation. Tools with examples are left alone: their own
examples and near misses already stand on both sides of their thresholds.
"""

from __future__ import annotations

from dataclasses import replace

from services.router.metrics import RouterMetrics, count_selection
from services.router.planning.judges import Ask, Decision, Verdict
from services.router.planning.settings import SelectorSettings


class WhetherJudge:
    name = "whether"

    def __init__(self, settings: SelectorSettings, metrics: RouterMetrics | None = None) -> None:
        self._floor = settings.whether_floor
        self._metrics = metrics

    async def judge(self, ask: Ask, verdict: Verdict) -> Verdict | None:
        index = ask.index
        cards = index.cards if index is not None else None
        asks = index.asks if index is not None else None
        if cards is None or asks is None or not ask.scored or self._floor <= 0:
            return None
        if verdict.decision is Decision.TOOLS and not verdict.undecided and verdict.by != "schema":
            tools = verdict.tools
        elif verdict.decision is Decision.AMBIGUOUS and verdict.candidates:
            tools = verdict.candidates[:1]
        else:
            return None
        if not tools or not all(t in cards.tools and cards.described[cards.index(t)] for t in tools):
            return None
        if asks.best(text.vector for text in ask.scored) >= self._floor:
            return None
        count_selection(self._metrics, self.name, "no_tool")
        return replace(
            verdict, decision=Decision.NONE, tools=(), candidates=(), segments={}, undecided=(), by=self.name
        )
