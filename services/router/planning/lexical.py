"""Word evidence for tools described only: the words a message shares with a tool's own card, weighted by rarity.

A tool from an MCP server or an OpenAI ``tools`` list brings a name, a
description and a schema. The sentence embedder compares a request with a
description poorly: "what did Lena say in #design about the logo?" lands
nearer a web fetch than "search chat history", and a tool with dozens of
example requests out-scores a tool with one description on the strength of
its many cards alone. What such a tool does have is words — its name, its
description, its parameters' descriptions — and a request that shares a rare
one of them ("chat", "expense", "ticket") is evidence for it that the
embedding misses. So the card index scores a described tool as the cosine
similarity *plus* ``described_words`` times this score: the hybrid of dense
and sparse retrieval, with the sparse side learnt from the loaded tool list.

The score of a text for a tool is the sum, over the content words (the
language's ``content_words``) the text shares with the tool's card, of each
word's inverse document frequency among the loaded tools' cards — a word
every tool's card uses says nothing about which tool, a word only one card
uses says much. Numbers are left out (they are values, not intent). The
weights are recomputed per tool list, so a tool added or removed changes them.

A request's opening verb is evidence of another kind: what it asks done.
"Find open tickets mentioning 'timeout'" shares "ticket" with every ticket
tool and embeds nearest the one that creates them; its verb says it reads.
The language reads the kind of a text's opening verb (``Language.action``:
read, create, update, delete, send, or the verb itself; a question reads:
"what reminders do I have set?" sets none), and a tool's name
says its kind the same way ("search_tickets" reads, "create_ticket"
creates). ``WordWeights.agreement`` is +1 for a tool of the text's kind, -1
for a tool of another plain kind, 0 where either side has none.

Measured on the generality eval's dev split (single asks, near misses and
built-in asks, first turns; ``EVAL.md``): the expected tool ranked first for
26 of 48 single asks by the cosine alone, 32 of 48 with the word score. A
question read as a read (not as no verb): first for 521 -> 532 of the spent
blind sets 2-14's 845 single asks (``evals.stages --ranking``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from services.router.planning.cards import ToolCard, name_words
from services.runtime.language import Language
from services.runtime.numbers import NUMBER_TOKEN


def words_of(texts: Iterable[str], language: Language) -> frozenset[str]:
    """The content words of all of ``texts`` (``Language.content_words``), as one set: the words of a card."""
    return frozenset().union(*(language.content_words(t) for t in texts))


@dataclass(frozen=True)
class WordWeights:
    """Per tool, the words of its card; per word, its weight (rarity among the loaded tools' cards)."""

    words: tuple[frozenset[str], ...]
    weight: dict[str, float]
    #: Per tool, what its name says it does (``Language.action`` of the name read as words), or None.
    actions: tuple[str | None, ...] = ()

    @classmethod
    def of(cls, cards: Sequence[ToolCard], language: Language) -> WordWeights:
        """The words of each card: its name read as words, its description and its parameters (every card
        text of a tool described only; a tool with examples by its name and description alone, so that its
        many example requests do not outweigh a described tool's one description)."""
        words = []
        for card in cards:
            texts = card.positives if card.described else (name_words(card.name), *card.positives[:1])
            words.append(words_of(texts, language) - {NUMBER_TOKEN})
        counts = Counter(w for ws in words for w in ws)
        n = len(words)
        actions = tuple(language.action(name_words(card.name)) for card in cards)
        return cls(tuple(words), {w: math.log((n + 1) / (c + 0.5)) for w, c in counts.items()}, actions)

    def scores(self, words: frozenset[str]) -> npt.NDArray[np.float32]:
        """Per tool, the summed weight of the words ``words`` shares with its card."""
        return np.asarray([sum(self.weight[w] for w in words & mine) for mine in self.words], dtype=np.float32)

    def agreement(self, action: str | None) -> npt.NDArray[np.float32]:
        """Per tool, +1 when its name does ``action`` (a text's, ``Language.action``), -1 when both are plain
        kinds and differ, 0 otherwise (a verb whose kind is not plain agrees only with itself)."""
        return np.asarray([_agreement(action, mine) for mine in self.actions], dtype=np.float32)

    def added(
        self,
        words: frozenset[str],
        action: str | None,
        described: npt.NDArray[np.bool_],
        per_word: float,
        per_verb: float,
    ) -> npt.NDArray[np.float32]:
        """What a text adds to each tool's cosine: for a tool described only, ``per_word`` times the words it shares
        with the card and ``per_verb`` times whether its opening verb does what the name says; nothing for a tool
        with examples. One scale for scoring a message and for no-tool coverage (``candidates.py``)."""
        if not described.any():
            return np.zeros(len(described), dtype=np.float32)
        score = per_word * self.scores(words) + per_verb * self.agreement(action)
        return np.where(described, score, 0.0).astype(np.float32)


def _agreement(text: str | None, tool: str | None) -> float:
    if text is None or tool is None:
        return 0.0
    literal = text.startswith("=") or tool.startswith("=")
    if text == tool:
        return 1.0 if literal else 0.0  # a plain kind is shared by many tools: agreeing on it sets none apart
    return 0.0 if literal else -1.0


__all__ = ["WordWeights", "words_of"]
