"""Intent words: the lexical double-check of the embedding selector.

Sentence embeddings match *topics*: "What are good restaurants in Chicago?"
lands near "What time is it in Chicago?" (the city dominates both vectors), and
the selector would run the clock. Seed 002 §3.3 pairs the cosine score with a
second, independent judge; ours is lexical and learnt from the same cards.

A tool's intent words are the content words (numbers, in digits or words,
folded into ``<num>``) that occur in a fair share of its example requests and
far more often there than in what needs no tool — the near misses and the
no-tool examples (the selector passes those; telling one tool from another is
the embedding's part, and against the calculator's many examples "<num>" had
stopped marking the unit converter's asks). For the built-in clock that is
"time", "date", "now", "today"…; for the calculator "<num>". A message the
embedding assigns to a tool but that shares none of the tool's intent words
is not decided by the embedding alone: it goes to the ambiguous band, where
the model decides. A tool whose examples yield no intent words is never held
back (no evidence either way).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from services.tools.numbers import words_to_digits

_TOKEN = re.compile(r"[a-z]+|\d+(?:[.,]\d+)*|[-+*/^%×÷=]")
#: Function words (and the tails of "what's", "don't"): frequent everywhere, so they say nothing about intent
#: ("in" would tie places to clocks).
_FUNCTION_WORDS = """
a about after all also am an and any are as at be been before but by can could did do does doing for from get got
had has have he her here him his how i if in into is it its just let me might more most much my no not of off on
once only or our out over please she should so some than that the their them then there these they this those to
too under up very was we were what when where which while who whom why will with would you your
s t ll re ve
"""
STOP_WORDS = frozenset(re.findall(r"[a-z]+", _FUNCTION_WORDS))

#: A word is an intent word of a tool when at least this share of its examples use it (at 0.08, the clock's
#: 32 examples lost "date", which two of them use) ...
MIN_SHARE = 0.06
#: ... and it is this many times more frequent there than in the texts that are not the tool.
MIN_RATIO = 3.0


#: An adverb's ending, off a stem of 4 letters at least ("currently", "hourly"; not "early", "daily", "only").
_ADVERB = re.compile(r"(?<=[a-z]{4})ly$")


def words(text: str) -> frozenset[str]:
    """Content words of ``text``: lower case, numbers (in digits or words) as ``<num>``, a plural "s" and an
    adverb's "ly" off ("currently" is the clock's "current"), function words out."""
    out = set()
    for token in _TOKEN.findall(words_to_digits(text.lower())):
        if token[0].isdigit():
            out.add("<num>")
        elif token not in STOP_WORDS:
            out.add(_ADVERB.sub("", token[:-1] if len(token) > 3 and token.endswith("s") else token))
    return frozenset(out)


def _share(texts: Sequence[frozenset[str]]) -> Counter[str]:
    return Counter(w for t in texts for w in t)


def intent_words(examples: Iterable[str], others: Iterable[str]) -> frozenset[str]:
    """The words that mark ``examples`` (one tool's requests) against ``others`` (what is not its ask)."""
    mine = [words(t) for t in examples]
    rest = [words(t) for t in others]
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
