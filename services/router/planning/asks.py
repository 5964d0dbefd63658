"""Whether a message asks for something a tool does at all: the ask classifier, one judge's evidence.

In: the language's labelled messages (``Language.ask_examples``: asks for
lookups, actions and the user's own data over about 80 kinds of tool, and
messages that need no tool — chat, advice, knowledge, writing help, talk about
a topic — most of them in the asks' own topics), embedded once per process by
the card embedder's model. Out: per message vector, the probability that it asks.

Why: a tool that brings only a name and a description is chosen by how near a
message comes to its description, and a near miss ("why do flights get
overbooked?", "my inbox is a nightmare") comes as near as an ask: no card score
separates them (AUC 0.54-0.60 over the spent blind sets, ``evals.stages
--separation``). What separates them is not the tool but the message — whether
it asks for a lookup or an action — and that is the same for every tool, so it
is learnt once, from a language's examples, not from any tool's cards. Fitted
on the built-in tools' cards instead (their examples against their near misses
and the no-tool examples), it read 0.65; fitted on these examples, 0.94 on the
same turns (docs/concepts/tool-selection.md).

How: the card classifier's softmax regression (``card_classifier.py``) with two
classes, "asks" and "needs no tool", fitted on the examples' vectors. Embedding
the 900 English examples and fitting takes ~5.6 s on two CPU cores, so it is
done once per machine for each embedding model and examples (``shared``): the
fitted weights are kept in the cache folder (``asks/``, named by a digest of
the model, the examples and the fit's constants) and every process, and every
tool list's card index in it, reads them; the router does it at start.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from services.router.planning import card_classifier
from services.router.planning.card_classifier import CardClassifier
from services.router.planning.embedding import Embedder, Vectors
from services.runtime.cache import cache_key
from services.runtime.cache_dir import cache_dir

log = logging.getLogger(__name__)

#: The class of a message that asks for something a tool does.
ASKS = 0


@dataclass(frozen=True)
class AskClassifier:
    """Whether a message vector asks for something a tool does (``probability``)."""

    classifier: CardClassifier

    @classmethod
    async def fitted(
        cls, examples: Sequence[tuple[str, bool]], embed: Callable[[Sequence[str]], Awaitable[Vectors]]
    ) -> AskClassifier:
        """Fitted on ``examples`` (text, asks) embedded by ``embed``; the fit runs on a worker thread."""
        vectors = await embed([text for text, _ in examples])
        labels = np.asarray([ASKS if asks else 1 - ASKS for _, asks in examples], dtype=np.int64)
        return cls(await asyncio.to_thread(CardClassifier.fit, vectors, labels, 2))

    def probability(self, vector: Vectors) -> float:
        """The probability that the message whose vector this is asks for something a tool does."""
        return self.classifier.probability(vector, ASKS)

    def best(self, vectors: Iterable[Vectors]) -> float:
        """The highest ``probability`` among a message's texts (the message, its clauses, its follow-up text): one
        text that asks makes the message an ask. 1.0 for no text: no evidence declines nothing."""
        return max((self.probability(v) for v in vectors), default=1.0)


#: Per embedding model (``Embedder.name``: two embedders of one model write the same vectors) and examples, the
#: classifier fitted on them.
_FITTED: dict[tuple[str, tuple[tuple[str, bool], ...]], AskClassifier] = {}


async def shared(
    examples: Sequence[tuple[str, bool]], embedder: Embedder, embed: Callable[[Sequence[str]], Awaitable[Vectors]]
) -> AskClassifier:
    """The classifier fitted on ``examples`` by ``embedder``'s model (through ``embed``, the index's way of writing
    texts for it): read from the cache folder, or fitted and written there, the first time; then the same one for
    every card index of the process."""
    key = (embedder.name, tuple(examples))
    if key not in _FITTED:
        fit = (card_classifier.SCALE, card_classifier.L2, card_classifier.STEPS, card_classifier.LEARNING_RATE)
        path = cache_dir() / "asks" / f"{cache_key(embedder.name, examples, fit)}.npz"
        kept = _read(path)
        if kept is None:
            kept = await AskClassifier.fitted(examples, embed)
            _write(path, kept)
        _FITTED[key] = kept
    return _FITTED[key]


def _read(path: os.PathLike[str]) -> AskClassifier | None:
    try:
        with np.load(path) as kept:
            return AskClassifier(CardClassifier(kept["weights"], kept["bias"], int(kept["none_class"])))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError) as exc:  # a torn or foreign file: fit again, and write it over
        log.warning("ask classifier cache %s unreadable (%s); fitting again", path, exc)
        return None


def _write(path: os.PathLike[str], fitted: AskClassifier) -> None:
    """Written whole or not at all (a temporary file renamed), so that a process reading it never sees half."""
    c = fitted.classifier
    try:
        folder = os.path.dirname(path)
        os.makedirs(folder, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, suffix=".npz", delete=False) as out:
            np.savez(out, weights=c.weights, bias=c.bias, none_class=c.none_class)
        os.replace(out.name, path)
    except OSError as exc:  # a read-only cache folder: every process fits its own
        log.warning("ask classifier not cached at %s (%s)", path, exc)


__all__ = ["AskClassifier", "shared"]
