"""The schema judge: what the tools' own parameter schemas prove about a message.

Three rules, each silent for a tool whose schema carries no hint
(``hints.py``), so a tool described only is never affected:

- **Applies.** A chosen or candidate tool whose required copied argument has
  no span in the message (a conversion with no quantity, a fetch with no URL),
  or whose required composed argument has no amount to compose from (a
  calculation in a message that states no number), cannot be its ask: it
  leaves the verdict, even a decided one. A tool chosen
  from one clause whose ask is partly in another fills from the whole message.
- **Evident.** An undecided message holding a span of a tool's evident shape
  (an arithmetic expression), for that tool alone among the candidates, is
  that tool's ask.
- **Pinned.** An undecided message that names exactly the one value each of
  its best tool's copied arguments needs, and is near that tool's cards by
  ``pin_lead`` (when it shares an intent word) or ``overrule``, is its ask.
"""

from __future__ import annotations

from dataclasses import replace

from services.router.metrics import RouterMetrics, count_selection
from services.router.planning.copying import applies, evident, pinned, unmentioned
from services.router.planning.judges import Ask, Decision, Verdict
from services.router.planning.settings import SelectorSettings


class SchemaJudge:
    """The rules the tools' schemas state (``copying.py``): applies, evident, pinned."""

    name = "schema"

    def __init__(self, settings: SelectorSettings, metrics: RouterMetrics | None = None) -> None:
        self._settings = settings
        self._metrics = metrics

    async def judge(self, ask: Ask, verdict: Verdict) -> Verdict | None:
        if verdict.decision is Decision.NONE:
            return None
        applicable = self._applicable(ask, verdict)
        if applicable.decision is not Decision.AMBIGUOUS:
            return applicable if applicable != verdict else None
        decided = self._evident(ask, applicable) or self._pinned(ask, applicable)
        if decided is not None:
            return decided
        return applicable if applicable != verdict else None

    def _applicable(self, ask: Ask, verdict: Verdict) -> Verdict:
        """The verdict less the tools whose schema the message cannot fill; a message left with none needs none."""
        turn = ask.turn
        earlier = (turn.previous_message, turn.previous_answer)

        def fits(name: str, text: str) -> bool:
            schema = ask.schema(name)
            ok = schema is None or applies(schema, text, *earlier)
            if not ok:
                count_selection(self._metrics, "embedding", "not_applicable")
            return ok

        # A tool chosen from a clause that cannot fill it may have the rest of its ask in another clause ("Bought
        # a 2 litre bottle for the party, how many cups is that?"): it fills from the whole message then.
        segments = dict(verdict.segments)
        for n in verdict.tools:
            part = segments.get(n, turn.message)
            schema = ask.schema(n)
            if part != turn.message and schema is not None:
                missing = unmentioned(schema, part, *earlier) - unmentioned(schema, turn.message, *earlier)
                if missing:
                    segments[n] = turn.message
        tools = tuple(n for n in verdict.tools if fits(n, segments.get(n, turn.message)))
        undecided = tuple(
            (part, kept) for part, names in verdict.undecided if (kept := tuple(n for n in names if fits(n, part)))
        )
        candidates = tuple(n for n in verdict.candidates if fits(n, turn.message))
        if verdict.decision is Decision.TOOLS and not tools:
            if not undecided:
                return replace(verdict, decision=Decision.NONE, tools=(), segments={}, undecided=(), by=self.name)
            return replace(
                verdict,
                decision=Decision.AMBIGUOUS,
                tools=(),
                segments={},
                undecided=(),
                candidates=tuple(n for _, names in undecided for n in names),
                by=self.name,
            )
        if verdict.decision is Decision.AMBIGUOUS and not candidates:
            return replace(verdict, decision=Decision.NONE, candidates=(), by=self.name)
        segments = {n: segments[n] for n in tools if n in segments}
        ruled = replace(verdict, tools=tools, segments=segments, undecided=undecided, candidates=candidates)
        return ruled if ruled == verdict else replace(ruled, by=self.name)

    def _evident(self, ask: Ask, verdict: Verdict) -> Verdict | None:
        shown = [n for n in verdict.candidates if (s := ask.schema(n)) is not None and evident(s, ask.message)]
        if len(shown) != 1:
            return None
        count_selection(self._metrics, "embedding", "evident")
        return self._decided(verdict, shown[0])

    def _pinned(self, ask: Ask, verdict: Verdict) -> Verdict | None:
        if not verdict.candidates or ask.index is None:
            return None
        best = verdict.candidates[0]
        schema = ask.schema(best)
        if schema is None or not pinned(schema, ask.message):
            return None
        s = self._settings
        needed = s.pin_lead if ask.index.shares_intent(best, ask.message) else s.overrule
        if verdict.scores.get(best, 0.0) - verdict.none_score < needed:
            return None
        count_selection(self._metrics, "embedding", "pinned")
        return self._decided(verdict, best)

    def _decided(self, verdict: Verdict, tool: str) -> Verdict:
        return replace(verdict, decision=Decision.TOOLS, tools=(tool,), segments={}, candidates=(), by=self.name)
