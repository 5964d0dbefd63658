"""Tool selection without a generation: nearest examples in a sentence-embedding space.

In: the tool list (each ``ToolSpec`` brings its description, example requests
and near misses) and a user message. Out: a ``Selection`` — the tools the
message clearly needs, "clearly none", or an ambiguous band with the candidate
tools, which the caller hands to the constrained LLM choice.

How a message is scored (seed 002 §3.3: a cheap pre-judge, thresholds with a
margin, the LLM only for the ambiguous band):

- Cards. When the tool list is (re)loaded, every example request and each tool's
  description are embedded once (positives, labelled with their tool), and so
  are the tools' near misses plus the tool-independent ``NO_TOOL_EXAMPLES``
  (the "no tool" class).
- Scores. A message (and each clause of it, see below) gets, per tool, its
  cosine similarity to the tool's nearest positive, and a "not this tool"
  score: its similarity to the nearest of that tool's near misses and the
  tool-independent no-tool examples. A tool's near misses count only against
  that tool: they often are another tool's business ("What is 7*8?" is a near
  miss of the clock and an example of the calculator).
- Decision per text. The best tool is *chosen* when its score is at least
  ``choose``, beats its "not this tool" score (one text, one ask: a runner-up
  is confusion, not a second ask), and the text shares one of the tool's
  intent words (``intent_words.py``: the lexical double-check; without one the
  text is ambiguous). The two judges agreeing is the evidence, so the lead over
  "not this tool" need not be wide: "What is 15 multiplied by 4?" leads the near
  miss "Explain what multiplication is" by 0.002 and is arithmetic all the same.
  The text needs *no tool* when the best tool scores below ``reject``, or its
  "not this tool" score beats it by ``margin``; no intent word overrules a
  "not this tool" score ahead by ``overrule`` ("What color is the sky on a
  clear day?" shares the clock's "day"). Anything else is *ambiguous*.
- Several asks in one message. "What is 23*47 and what time is it in Tokyo?"
  embeds as a blend of two intents and may clear neither threshold, so the
  message is also split into clauses (at "and", "also", ";", "?", ", "…) and each
  clause is decided on its own; the chosen tools are the union. Each chosen
  tool remembers the clause that asked for it, so its arguments are filled
  from that clause alone.
- The band's second opinion. A softmax regression fitted on the same cards
  (``card_classifier.py``) classifies the whole message; ``Selection.judged``
  carries its class and probability, and planning lets a confident verdict
  decide an ambiguous message without a generation (``band_confidence``).
- Follow-ups. A message the selector cannot decide on its own ("And in
  Paris?" scores low everywhere) is scored again together with the previous
  user message; one that is itself near a no-tool example ("Thanks!") is not.

Thresholds are calibrated on the development split of ``make eval`` (EVAL.md).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from agentmesh.common.v1 import common_pb2
from services.router.card_classifier import CardClassifier
from services.router.embedding import Embedder, Vectors
from services.router.intent_words import intent_words, words
from services.router.no_tool_examples import NO_TOOL_EXAMPLES

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class SelectorSettings:
    """Cosine-similarity thresholds (all-MiniLM-L6-v2 scale)."""

    choose: float = 0.45
    reject: float = 0.35
    #: The lead the "not this tool" side needs over the best tool for "no tool".
    margin: float = 0.03
    #: A lead of "not this tool" that no intent word overrules: "What color is the sky on a clear day?" shares
    #: the clock's "day" but is 0.27 nearer a no-tool example than any clock ask.
    overrule: float = 0.2
    #: The lead over "not this tool" that decides a band ask for a tool when the ask shares the tool's intent
    #: word and names the one value each copied argument needs (``planner.pinned``); without an intent word the
    #: ask needs ``overrule``.
    pin_lead: float = 0.06
    #: The card classifier's probability at which its verdict decides an ambiguous message (a candidate tool, or
    #: no tool) instead of a generation; 0 leaves the whole band to the generation.
    band_confidence: float = 0.75
    max_tools: int = 3

    def __post_init__(self) -> None:
        if not 0.0 <= self.reject <= self.choose <= 1.0:
            raise ValueError("selector thresholds must satisfy 0 <= reject <= choose <= 1")
        if not (0 <= self.margin <= self.overrule and 0 <= self.pin_lead <= self.overrule):
            raise ValueError("selector margins must satisfy 0 <= margin <= overrule and 0 <= pin_lead <= overrule")
        if not (self.band_confidence == 0 or 0.5 <= self.band_confidence <= 1.0):
            raise ValueError("selector band confidence must be 0 (off) or between 0.5 and 1")


class Decision(Enum):
    TOOLS = "tools"
    NONE = "none"
    AMBIGUOUS = "ambiguous"


@dataclass(frozen=True)
class Selection:
    """What the selector decided about one message."""

    decision: Decision
    #: Chosen tools (decision TOOLS), best first.
    tools: tuple[str, ...] = ()
    #: Tools worth asking the LLM about (decision AMBIGUOUS), best first.
    candidates: tuple[str, ...] = ()
    #: Per chosen tool, the part of the message that asked for it.
    segments: dict[str, str] = field(default_factory=dict)
    #: With decision TOOLS: other clauses of the message the selector could not decide, each with its
    #: candidate tools, for the constrained LLM choice (a second ask must not be dropped silently).
    undecided: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: Best score per tool over the texts scored, and the best tool's "not this tool" score (traces, calibration).
    scores: dict[str, float] = field(default_factory=dict)
    none_score: float = 0.0
    #: The card classifier's verdict on the whole message: a tool's name, or "" for no tool, and its probability.
    judged: tuple[str, float] = ("", 0.0)

    def confidently_judged(self, confidence: float) -> str | None:
        """The classifier's verdict ("" for no tool) when its probability reaches ``confidence`` (> 0), else None."""
        name, probability = self.judged
        return name if confidence > 0 and probability >= confidence else None


#: Clause ends: ; ? ! anywhere, a comma or colon before a space (not "1,250" or "https://"), joining words.
_SPLIT = re.compile(r"\s*(?:[;?!]|[:,](?=\s)|\s+\b(?:and|also|plus|then|as well as)\b)\s*", re.IGNORECASE)
_LEADING = re.compile(r"^(?:(?:and|also|plus|then)\b\s*)+", re.IGNORECASE)
_MIN_CLAUSE_WORDS = 3


_NOT_A_WORD = re.compile(r"[\d/*+=^%:]")
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


_URL = re.compile(r"\bhttps?://\S+", re.IGNORECASE)
#: What a URL is embedded as (``_embedded``).
URL_WORDS = "this link"


def _embedded(text: str) -> str:
    """``text`` as the embedder reads it: every URL written as the words ``URL_WORDS``.

    Why: the sentence model splits a URL into a dozen word pieces that mean
    nothing to it ("invite", "abc", "##123"), and they drown the ask around it:
    "Please read https://example.com/terms and give me the main points" scored
    0.25 against the fetch examples, below the no-tool ones. Read as "Please
    read this link and give me the main points", the ask is what is left
    (of three wordings tried on the tuning prompts, "this link" moved no near
    miss; "a web page" and "the page" pulled "What is a web page made of?" and
    a pasted status-page link to the fetch tool). The intent words still see
    the URL itself.
    """
    return _URL.sub(URL_WORDS, text)


def _shape(text: str) -> str:
    """``text`` with every number written as the word "number": what an ask looks like, whatever its values."""
    return _NUMBER.sub("number", text)


def _short(clause: str) -> bool:
    """Too short to be an ask of its own: under three words, or two of which none is a number, an
    expression or a URL ("calculate 88*12" and "fetch https://example.com" are asks; "and Paris" is not)."""
    n = len(clause.split())
    return n < _MIN_CLAUSE_WORDS and not (n == 2 and _NOT_A_WORD.search(clause))


def clauses(message: str) -> list[str]:
    """The message's clauses when it has more than one, else []. Short fragments join their neighbour."""
    parts = [_LEADING.sub("", p.strip(" ,.")) for p in _SPLIT.split(message)]
    merged: list[str] = []
    for part in parts:
        if not part:
            continue
        if merged and (_short(part) or _short(merged[-1])):
            merged[-1] = f"{merged[-1]} and {part}"
        else:
            merged.append(part)
    return merged if len(merged) > 1 else []


@dataclass
class _Cards:
    tools: list[str]
    #: One row per positive example; ``owner[i]`` is the index of its tool.
    positives: Vectors
    owner: npt.NDArray[np.int64]
    negatives: Vectors
    #: ``negative_owner[j]``: the tool whose near miss row j is, or -1 for a tool-independent no-tool example.
    negative_owner: npt.NDArray[np.int64]
    #: Per tool, the words that mark its requests (``intent_words``): the lexical double-check.
    intents: list[frozenset[str]] = field(default_factory=list)
    #: ``rivals[i, j]``: negative row j shares one of tool i's intent words, so it can stand against an ask
    #: of tool i that shares one too (computed once per tool list, not per message).
    rivals: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros((0, 0), dtype=np.bool_))
    #: The band's second opinion, fitted on the positives (by owner) and the negatives (class "no tool").
    classifier: CardClassifier | None = None


@dataclass(frozen=True)
class _Verdict:
    decision: Decision
    chosen: list[str]
    scores: dict[str, float]
    none_score: float


class ToolSelector:
    """Embeds the tool cards once per tool list; decides each message with two matrix products."""

    def __init__(
        self,
        embedder: Embedder,
        settings: SelectorSettings = SelectorSettings(),
        no_tool_examples: Sequence[str] = NO_TOOL_EXAMPLES,
    ) -> None:
        self._embedder = embedder
        self._settings = settings
        self._no_tool = tuple(no_tool_examples)
        self._cards: _Cards | None = None
        self._loaded_for: tuple[tuple[str, ...], ...] | None = None
        #: The cards' examples and negatives with numbers masked (``_shape``), embedded at load, for ``nearest``.
        self._shape_vectors: dict[str, Vectors] = {}

    @property
    def settings(self) -> SelectorSettings:
        return self._settings

    @property
    def loaded(self) -> bool:
        return self._cards is not None

    async def load(self, specs: Sequence[common_pb2.ToolSpec]) -> None:
        """Embed the cards of ``specs`` (skipped when the tool list did not change)."""
        identity = tuple((t.name, t.description, *(e.text for e in t.examples), *t.negative_examples) for t in specs)
        if identity == self._loaded_for:
            return
        texts: list[str] = []
        owner: list[int] = []
        negatives: list[str] = list(self._no_tool)
        negative_owner: list[int] = [-1] * len(negatives)  # -1: against every tool
        for i, spec in enumerate(specs):
            for text in [spec.description, *(e.text for e in spec.examples)]:
                if text:
                    texts.append(text)
                    owner.append(i)
            for text in spec.negative_examples:
                if text:
                    negatives.append(text)
                    negative_owner.append(i)
        # Intent words set a tool's asks apart from what needs no tool (near misses and no-tool requests), not
        # from other tools' asks: telling tools apart is the embedding's part, and against the calculator's
        # examples "<num>" stopped marking the unit converter's asks.
        intents = [intent_words((e.text for e in spec.examples), negatives) for spec in specs]
        shapes = list(dict.fromkeys(_shape(t) for t in [*(e.text for s in specs for e in s.examples), *negatives] if t))
        vectors = await self._embed([*texts, *negatives, *shapes])
        self._shape_vectors = dict(zip(shapes, vectors[len(texts) + len(negatives) :], strict=True))
        vectors = vectors[: len(texts) + len(negatives)]
        negative_words = [words(t) for t in negatives]
        # Off the event loop: a fit takes ~0.4 s for the built-in tools' cards and grows with them.
        classifier = await asyncio.to_thread(
            CardClassifier.fit,
            vectors,
            np.asarray([*owner, *[len(specs)] * len(negatives)], dtype=np.int64),
            len(specs) + 1,
        )
        self._cards = _Cards(
            tools=[t.name for t in specs],
            positives=vectors[: len(texts)],
            owner=np.asarray(owner, dtype=np.int64),
            negatives=vectors[len(texts) :],
            negative_owner=np.asarray(negative_owner, dtype=np.int64),
            intents=intents,
            rivals=np.asarray([[bool(w & mine) for w in negative_words] for mine in intents], dtype=np.bool_).reshape(
                len(intents), len(negatives)
            ),
            classifier=classifier,
        )
        self._loaded_for = identity
        log.info("tool selector: %d tools, %d examples, %d no-tool examples", len(specs), len(texts), len(negatives))

    async def select(self, message: str, *, previous_message: str = "") -> Selection:
        cards = self._cards
        if cards is None or not cards.tools:
            return Selection(Decision.NONE)
        parts = clauses(message)
        texts = [message, *parts]
        follow_up = f"{previous_message} {message}" if previous_message else ""
        if follow_up:
            texts.append(follow_up)
        vectors = await self._embed(texts)
        verdicts = [self._decide(cards, v, t) for t, v in zip(texts, vectors, strict=True)]
        whole = verdicts[0]
        clause_verdicts = verdicts[1 : 1 + len(parts)]
        if follow_up and verdicts[-1].decision is Decision.TOOLS and self._open(whole):
            whole = verdicts[-1]
        scores = dict(whole.scores)
        for v in clause_verdicts:
            for name, score in v.scores.items():
                scores[name] = max(scores.get(name, 0.0), score)
        segments: dict[str, str] = {}
        for part, v in zip(parts, clause_verdicts, strict=True):
            for name in v.chosen:
                segments.setdefault(name, part)
        for name in whole.chosen:
            segments.setdefault(name, message)
        if segments:
            chosen = sorted(segments, key=lambda n: -scores.get(n, 0.0))[: self._settings.max_tools]
            undecided = tuple(
                (part, candidates)
                for part, v in zip(parts, clause_verdicts, strict=True)
                if v.decision is Decision.AMBIGUOUS
                and max(v.scores, key=lambda n: v.scores[n]) not in chosen  # else: more words of the same ask
                and (candidates := self._candidates(v.scores, exclude=chosen))
                and not any(segments.get(n) == part for n in chosen)
            )
            if len(chosen) == 1:
                # One tool chosen: it fills from the whole message. A clause left undecided may be more of the
                # same ask ("If I save $15 a week, | how much will I have after 12 weeks?"): filled from its
                # own clause, the calculator never saw the 12.
                segments = {chosen[0]: message}
            return Selection(
                Decision.TOOLS,
                tools=tuple(chosen),
                segments={n: segments[n] for n in chosen},
                undecided=undecided,
                scores=scores,
                none_score=whole.none_score,
            )
        if whole.decision is Decision.NONE and all(v.decision is Decision.NONE for v in clause_verdicts):
            return Selection(Decision.NONE, scores=scores, none_score=whole.none_score)
        candidates = self._candidates(scores)
        if not candidates:
            return Selection(Decision.NONE, scores=scores, none_score=whole.none_score)
        return Selection(
            Decision.AMBIGUOUS,
            candidates=candidates,
            scores=scores,
            none_score=whole.none_score,
            judged=self._judged(cards, vectors[0]),
        )

    @staticmethod
    def _judged(cards: _Cards, vector: Vectors) -> tuple[str, float]:
        """The card classifier's class for ``vector`` (a tool's name, "" for no tool) and its probability."""
        if cards.classifier is None:
            return "", 0.0
        index, probability = cards.classifier.predict(vector)
        return ("" if index == cards.classifier.none_class else cards.tools[index]), probability

    def shares_intent(self, tool: str, text: str) -> bool:
        """Whether ``text`` shares one of ``tool``'s intent words (the lexical judge of ``_decide``); False for a
        tool not in the loaded list or with no intent words."""
        cards = self._cards
        if cards is None or tool not in cards.tools or not cards.intents:
            return False
        return bool(words(text) & cards.intents[cards.tools.index(tool)])

    async def nearest(self, text: str, examples: Sequence[tuple[str, T]], k: int) -> list[tuple[str, T]]:
        """The ``k`` examples nearest ``text`` in the shape of the ask, least to most similar (for few-shot
        prompts: a small model leans on the last example, so the nearest goes last).

        Shape, not numbers: texts are compared with every number written as the word "number". Compared as
        written, "If a pizza costs $12 and I buy 3" was nearest "calculate (12 + 8) * 3" (the same digits),
        and the model copied that example's expression.
        """
        if not examples:
            return []
        shapes = [_shape(e[0]) for e in examples]
        unknown = list(dict.fromkeys(t for t in shapes if t not in self._shape_vectors))  # not a card's example
        vectors = await self._embed([_shape(text), *unknown])
        known = {**self._shape_vectors, **dict(zip(unknown, vectors[1:], strict=True))}
        sims = np.stack([known[t] for t in shapes]) @ vectors[0]
        return [examples[i] for i in np.argsort(sims, kind="stable")[-k:]]

    async def _embed(self, texts: Sequence[str]) -> Vectors:
        """Every text the selector compares, embedded as ``_embedded`` writes it (cards, messages, shapes)."""
        return await self._embedder.embed([_embedded(t) for t in texts])

    def _open(self, verdict: _Verdict) -> bool:
        """Undecided, or "no tool" only for scoring low: not a message that is itself near a no-tool
        example ("Thanks!"), which stays no tool whatever came before."""
        if verdict.decision is Decision.TOOLS:
            return False
        best = max(verdict.scores.values(), default=0.0)
        return verdict.none_score - best < self._settings.margin

    def _candidates(self, scores: dict[str, float], exclude: Sequence[str] = ()) -> tuple[str, ...]:
        """Tools worth asking the model about: above ``reject``, best first."""
        eligible = [n for n in scores if n not in exclude and scores[n] >= self._settings.reject]
        return tuple(sorted(eligible, key=lambda n: -scores[n])[: self._settings.max_tools])

    def _decide(self, cards: _Cards, vector: Vectors, text: str) -> _Verdict:
        s = self._settings
        per_tool = np.full(len(cards.tools), -1.0, dtype=np.float32)
        np.maximum.at(per_tool, cards.owner, cards.positives @ vector)
        negative_sims = cards.negatives @ vector
        generic = cards.negative_owner < 0
        no_tool = float(negative_sims[generic].max()) if generic.any() else -1.0
        scores = {name: round(float(per_tool[i]), 4) for i, name in enumerate(cards.tools)}
        best_index = int(per_tool.argmax())
        best = float(per_tool[best_index])
        mine = cards.negative_owner == best_index
        against = max(no_tool, float(negative_sims[mine].max()) if mine.any() else -1.0)
        # One ask per text: a second tool scoring high on the same text is confusion, not a second ask.
        if best >= s.choose and against - best < s.overrule:
            intents = cards.intents[best_index] if cards.intents else frozenset()
            if not intents or words(text) & intents:
                # Judged in intent as well as in topic: a negative that shares none of the tool's intent words
                # is near in topic only ("Explain how the kilogram is defined" against "How many ounces is 1
                # kilogram?"), and does not stand against an ask that does.
                rivals = (generic | mine) & cards.rivals[best_index] if intents else generic | mine
                if best > (float(negative_sims[rivals].max()) if rivals.any() else -1.0):
                    return _Verdict(Decision.TOOLS, [cards.tools[best_index]], scores, against)
            elif best > against:
                return _Verdict(Decision.AMBIGUOUS, [], scores, against)  # near in topic, not in intent: ask the model
        if best < s.reject or against - best >= s.margin:
            return _Verdict(Decision.NONE, [], scores, against)
        return _Verdict(Decision.AMBIGUOUS, [], scores, against)
