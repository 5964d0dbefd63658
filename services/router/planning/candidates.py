"""Candidates: the tool cards embedded once per tool list, and every text of a message scored against them.

In: the tool list (``cards.py`` turns it into texts) and, per message, its texts — the message, its clauses,
the message with the previous one for a follow-up, embedded in one call. Out: per text, a ``TextScore`` — each
tool's similarity to its nearest card, and to every negative (no-tool examples, near misses), and whether its
opening verb contradicts what a described tool does.

A new tool list re-embeds only card texts not embedded before (a vector cache
keyed by text), learns each tool's intent words and fits the card classifier
on a worker thread; the first load also fits the ask classifier (``asks.py``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from agentmesh.common.v1 import common_pb2
from services.router.planning.asks import AskClassifier, shared
from services.router.planning.card_classifier import CardClassifier
from services.router.planning.cards import ToolCard, name_words, tool_cards
from services.router.planning.embedding import Embedder, Vectors
from services.router.planning.intent_words import intent_words
from services.router.planning.lexical import WordWeights, words_of
from services.router.planning.no_tool_examples import NO_TOOL_EXAMPLES
from services.router.planning.settings import SelectorSettings
from services.runtime.language import ENGLISH, Language

log = logging.getLogger(__name__)
T = TypeVar("T")
#: ``Cards.negative_owner`` of a capability ask (``no_tool_examples.CAPABILITY_ASKS``).
CAPABILITY = -2


@dataclass
class Cards:
    """The embedded cards of one tool list."""

    tools: list[str]
    #: Per tool: brought no example, so its thresholds are ``described_*`` (``cards.py``).
    described: npt.NDArray[np.bool_]
    #: One row per positive card text; ``owner[i]`` is the index of its tool.
    positives: Vectors
    owner: npt.NDArray[np.int64]
    negatives: Vectors
    #: ``negative_owner[j]``: the tool whose near miss row j is, -1 for a tool-independent no-tool example, or
    #: ``CAPABILITY`` for a capability ask (it stands against the tools that bring examples only).
    negative_owner: npt.NDArray[np.int64]
    negative_texts: list[str]
    #: Per tool, the words that mark its requests (``intent_words``): the lexical double-check.
    intents: list[frozenset[str]] = field(default_factory=list)
    #: ``rivals[i, j]``: negative row j shares one of tool i's intent words (computed once per tool list).
    rivals: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros((0, 0), dtype=np.bool_))
    #: The band's second opinion, fitted on the positives (by owner) and the negatives (class "no tool").
    classifier: CardClassifier | None = None
    #: No-tool examples left out because a loaded tool covers them (``covered``).
    covered: tuple[str, ...] = ()
    #: The words of each tool's card and their rarity: a described tool's word score (``lexical.py``).
    words: WordWeights | None = None

    def index(self, tool: str) -> int:
        return self.tools.index(tool)

    def intents_of(self, tool: str) -> frozenset[str]:
        """``tool``'s intent words; none for a tool not loaded."""
        return self.intents[self.tools.index(tool)] if tool in self.tools and self.intents else frozenset()


@dataclass(frozen=True)
class TextScore:
    """One text of a message against the cards."""

    text: str
    vector: Vectors
    #: Per tool (``Cards.tools`` order): similarity to its nearest positive card.
    per_tool: npt.NDArray[np.float32]
    #: Similarity to every negative row.
    negatives: npt.NDArray[np.float32]
    #: The text's ask words (``Language.ask_words``), for the intent check.
    words: frozenset[str]
    #: Per tool described only: the text's opening verb does another plain kind of thing than its name says.
    contradicted: npt.NDArray[np.bool_]


class CardIndex:
    """Embeds the tool cards once per tool list; scores a message's texts with two matrix products each."""

    def __init__(
        self,
        embedder: Embedder,
        settings: SelectorSettings | None = None,
        no_tool_examples: Sequence[str] = NO_TOOL_EXAMPLES,
        language: Language = ENGLISH,
        capability_asks: Sequence[str] = (),
        *,
        ask_examples: Sequence[tuple[str, bool]] = (),
    ) -> None:
        self._embedder = embedder
        self.settings = settings or SelectorSettings()
        self.language = language
        self._capabilities = frozenset(capability_asks)
        self._no_tool = tuple(dict.fromkeys([*no_tool_examples, *capability_asks]))
        self.cards: Cards | None = None
        self._ask_examples = ask_examples
        self.asks: AskClassifier | None = None  # fitted at the first load when ``ask_examples`` are given
        self._loaded_for: tuple[tuple[str, ...], ...] | None = None
        #: Every card text embedded so far (as ``_embed`` writes it): a changed tool list embeds only what is new.
        self._vectors: dict[str, Vectors] = {}
        self._dimensions = 384

    @property
    def loaded(self) -> bool:
        return self.cards is not None

    @property
    def no_tool_examples(self) -> list[str]:
        """The tool-independent no-tool examples this tool list leaves standing (none covered by a tool)."""
        cards = self.cards
        if cards is None:
            return list(self._no_tool)
        return [t for t, owner in zip(cards.negative_texts, cards.negative_owner, strict=True) if owner == -1]

    async def load(self, specs: Sequence[common_pb2.ToolSpec]) -> None:
        """Embed the cards of ``specs`` (skipped when the tool list did not change)."""
        identity = tuple(
            (t.name, t.description, t.parameters_json_schema, *(e.text for e in t.examples), *t.negative_examples)
            for t in specs
        )
        if identity == self._loaded_for:
            return
        if self._ask_examples and self.asks is None:  # the same for every tool list: fitted once
            self.asks = await shared(self._ask_examples, self._embedder, self._embed)
        cards = tool_cards(specs)
        texts = [t for c in cards for t in c.positives]
        owner = [i for i, c in enumerate(cards) for _ in c.positives]
        own_negatives = [(i, t) for i, c in enumerate(cards) for t in c.negatives]
        every_negative = [*self._no_tool, *(t for _, t in own_negatives)]
        shapes = [self.language.shape(t) for c in cards if not c.described for t in c.intent_texts]
        shapes += [self.language.shape(t) for t in every_negative]
        await self._ensure([*texts, *every_negative, *shapes], keep_only=True)
        positives = self._stack(texts)
        described = np.asarray([c.described for c in cards], dtype=np.bool_)
        weights = WordWeights.of(cards, self.language)
        generic = self._uncovered(cards, positives, np.asarray(owner, dtype=np.int64), described, weights)
        negatives = [*generic, *(t for _, t in own_negatives)]
        negative_owner = [CAPABILITY if t in self._capabilities else -1 for t in generic]
        negative_owner += [i for i, _ in own_negatives]
        # Intent words set a tool's asks apart from what needs no tool (near misses and no-tool requests), not
        # from other tools' asks: telling tools apart is the embedding's part.
        intents = [intent_words(c.intent_texts, negatives, self.language) for c in cards]
        # A tool described only is also told apart from the other tools: a word another tool's name or description
        # uses ("ticket" in every ticket tool's) is no evidence for one of them, so such an ask goes to the band.
        card_words = [words_of((name_words(c.name), *c.positives[:1]), self.language) for c in cards]
        for i in np.flatnonzero(described):
            intents[i] -= frozenset().union(*(w for j, w in enumerate(card_words) if j != i))
        negative_vectors = self._stack(negatives)
        # Off the event loop: a fit takes ~0.4 s for the built-in tools' cards and grows with them.
        classifier = await asyncio.to_thread(
            CardClassifier.fit,
            np.concatenate([positives, negative_vectors]),
            np.asarray([*owner, *[len(cards)] * len(negatives)], dtype=np.int64),
            len(cards) + 1,
        )
        negative_words = [self.language.ask_words(t) for t in negatives]
        self.cards = Cards(
            tools=[c.name for c in cards],
            described=described,
            positives=positives,
            owner=np.asarray(owner, dtype=np.int64),
            negatives=negative_vectors,
            negative_owner=np.asarray(negative_owner, dtype=np.int64),
            negative_texts=negatives,
            intents=intents,
            rivals=np.asarray([[bool(w & mine) for w in negative_words] for mine in intents], dtype=np.bool_).reshape(
                len(intents), len(negatives)
            ),
            classifier=classifier,
            covered=tuple(t for t in self._no_tool if t not in generic),
            words=weights,
        )
        self._loaded_for = identity
        counts = (len(cards), int(described.sum()), len(texts), len(negatives), len(self._no_tool) - len(generic))
        log.info("tool cards: %d tools (%d described only), %d card texts, %d no-tool examples (%d covered)", *counts)

    def _uncovered(
        self,
        cards: Sequence[ToolCard],
        positives: Vectors,
        owner: npt.NDArray[np.int64],
        described: npt.NDArray[np.bool_],
        weights: WordWeights,
    ) -> list[str]:
        """The no-tool examples no loaded tool covers: one scoring a tool's choose threshold on the judges'
        scale (cosine and word score), sharing a word of its own with the tool's cards, is the tool's ask."""
        if not cards or not self._no_tool:
            return list(self._no_tool)
        vectors = self._stack(list(self._no_tool))
        per_tool = np.full((len(self._no_tool), len(cards)), -1.0, dtype=np.float32)
        for i in range(len(cards)):
            rows = positives[owner == i]
            if len(rows):
                per_tool[:, i] = (vectors @ rows.T).max(axis=1)
        s = self.settings
        choose = np.where(described, s.described_choose, s.choose)
        tool_words = [words_of(c.positives, self.language) for c in cards]
        example_words = [self.language.content_words(t) for t in self._no_tool]
        actions = [self.language.action(t) for t in self._no_tool]
        per_tool += np.stack(
            [self._word_score(w, a, described, weights) for w, a in zip(example_words, actions, strict=True)]
        )
        kept = []
        for j, text in enumerate(self._no_tool):
            # The words it shares with a near tool's cards must be its own: a word the other no-tool examples
            # use too ("what", "tell") is no sign of that tool's business.
            elsewhere = frozenset().union(*(w for k, w in enumerate(example_words) if k != j))
            near = [i for i in np.flatnonzero(per_tool[j] >= choose) if (example_words[j] & tool_words[i]) - elsewhere]
            if not near:
                kept.append(text)
        return kept

    async def score(self, texts: Sequence[str], asks: Sequence[str] | None = None) -> list[TextScore]:
        """Each text against the loaded cards (one embedder call). ``asks``: per text, the words whose opening verb
        is its action (``Language.action``) when not the text's own (a follow-up opens with the previous message)."""
        cards = self.cards
        if cards is None:
            raise RuntimeError("score() before load()")
        vectors = await self._embed(texts)
        out = []
        for text, ask, vector in zip(texts, asks or texts, vectors, strict=True):
            per_tool = np.full(len(cards.tools), -1.0, dtype=np.float32)
            np.maximum.at(per_tool, cards.owner, cards.positives @ vector)
            action, words = self.language.action(ask), self.language.ask_words(text)
            per_tool += self._word_score(self.language.content_words(text), action, cards.described, cards.words)
            verbs = cards.words.agreement(action) if cards.words else np.zeros(len(cards.tools), dtype=np.float32)
            against = (verbs < 0) & cards.described
            out.append(TextScore(text, vector, per_tool, cards.negatives @ vector, words, against))
        return out

    def _word_score(
        self, words: frozenset[str], action: str | None, described: npt.NDArray[np.bool_], weights: WordWeights | None
    ) -> npt.NDArray[np.float32]:
        """What a text's words add to each tool's cosine (``WordWeights.added``, on this index's settings)."""
        if weights is None:
            return np.zeros(len(described), dtype=np.float32)
        return weights.added(words, action, described, self.settings.described_words, self.settings.described_action)

    def classify(self, vector: Vectors) -> tuple[str, float]:
        """The card classifier's class for ``vector`` (a tool's name, "" for no tool) and its probability."""
        cards = self.cards
        if cards is None or cards.classifier is None:
            return "", 0.0
        index, probability = cards.classifier.predict(vector)
        return ("" if index == cards.classifier.none_class else cards.tools[index]), probability

    def shares_intent(self, tool: str, text: str) -> bool:
        """Whether ``text`` shares one of ``tool``'s intent words; False for a tool not loaded or with none."""
        return self.cards is not None and bool(self.language.ask_words(text) & self.cards.intents_of(tool))

    async def nearest(self, text: str, examples: Sequence[tuple[str, T]], k: int) -> list[tuple[str, T]]:
        """The ``k`` examples nearest ``text`` in the shape of the ask, least to most similar (for few-shot
        prompts: a small model leans on the last example, so the nearest goes last).

        Shape, not numbers: texts are compared with every number written as the word "number". Compared as
        written, "If a pizza costs $12 and I buy 3" was nearest "calculate (12 + 8) * 3" (the same digits),
        and the model copied that example's expression.
        """
        if not examples:
            return []
        shapes = [self.language.shape(e[0]) for e in examples]
        target = await self._ensure(shapes, also=self.language.shape(text))
        sims = self._stack(shapes) @ target
        return [examples[i] for i in np.argsort(sims, kind="stable")[-k:]]

    async def _ensure(self, texts: Sequence[str], *, also: str = "", keep_only: bool = False) -> Vectors:
        """Embed (and keep) the texts not embedded before, in one embedder call with ``also`` (a message, whose
        vector is returned, not kept). ``keep_only``: forget every vector but ``texts``'s (a new tool list)."""
        if keep_only:
            wanted = set(texts)
            self._vectors = {t: v for t, v in self._vectors.items() if t in wanted}
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        asked = [also] if also else []
        vectors = await self._embed([*asked, *missing]) if asked or missing else np.zeros((0, 0), dtype=np.float32)
        self._vectors.update(zip(missing, vectors[len(asked) :], strict=True))
        self._dimensions = vectors.shape[1] if len(vectors) else self._dimensions
        return vectors[0] if asked else np.zeros(self._dimensions, dtype=np.float32)

    def _stack(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self._dimensions), dtype=np.float32)
        return np.stack([self._vectors[t] for t in texts])

    async def _embed(self, texts: Sequence[str]) -> Vectors:
        """Every text compared, embedded as the language writes it for the embedder (a URL as words)."""
        return await self._embedder.embed([self.language.for_embedding(t) for t in texts])
