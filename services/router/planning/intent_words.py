"""Intent words: the lexical double-check of the embedding selector.

Sentence embeddings match *topics*: "What are good restaurants in Chicago?"
lands near "What time is it in Chicago?" (the city dominates both vectors), and
the selector would run a time tool. Seed 002 §3.3 pairs the cosine score with a
second, independent judge; ours is lexical and learnt from the same cards.

A tool's intent words are the content words (numbers, in digits or words,
folded into ``<num>``) that occur in a fair share of its example requests and
far more often there than in what needs no tool — the near misses and the
no-tool examples (the selector passes those; telling one tool from another is
the embedding's part, and against an arithmetic tool's many examples "<num>"
had stopped marking a conversion tool's asks). For a time tool that is "time",
"date", "day"…; for an arithmetic tool "<num>". The words are the language's
*ask words*: a phrase that only says when ("right now", "over the next 3
days", "2026-11-01") qualifies any ask, and had made "is it raining in Porto
right now?" a time tool's ask and "how much did I spend since 2026-11-01?" an
arithmetic tool's. A message the
embedding assigns to a tool but that shares none of the tool's intent words
is not decided by the embedding alone: it goes to the ambiguous band, where
the model decides. A tool whose examples yield no intent words is never held
back (no evidence either way).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from services.runtime.language import ENGLISH, Language

#: A word is an intent word of a tool when at least this share of its examples use it (at 0.08, a time tool's
#: 32 examples lost "date", which two of them use) ...
MIN_SHARE = 0.06
#: ... and it is this many times more frequent there than in the texts that are not the tool.
MIN_RATIO = 3.0


def _share(texts: Sequence[frozenset[str]]) -> Counter[str]:
    return Counter(w for t in texts for w in t)


def intent_words(examples: Iterable[str], others: Iterable[str], language: Language = ENGLISH) -> frozenset[str]:
    """The words that mark ``examples`` (one tool's requests) against ``others`` (what is not its ask); the
    words are the language's ``ask_words`` (a phrase that only says when, "right now", marks no tool's asks)."""
    mine = [language.ask_words(t) for t in examples]
    rest = [language.ask_words(t) for t in others]
    if not mine:
        return frozenset()
    mine_df, rest_df = _share(mine), _share(rest)
    marks = set()
    for word, count in mine_df.items():
        share = count / len(mine)
        background = (rest_df[word] + 1) / (len(rest) + 1)  # add-one: a word never seen elsewhere is not infinite
        if share >= MIN_SHARE and share >= MIN_RATIO * background:
            marks.add(word)
    return frozenset(marks)
