"""A linear classifier over the tool cards: the selector's second opinion for its ambiguous band.

In: the card vectors the selector already embeds when it (re)loads the tool
list — each tool's description and examples (labelled with the tool) and every
near miss and tool-independent no-tool example (labelled "no tool") — and, per
message, the message's vector. Out: the most probable class and its
probability.

Why: the selector's nearest-example scores leave a band of messages whose best
tool is neither clearly near nor clearly far, and on the embedded 135M model the
constrained choice the band falls back to is the weakest judge in the turn (it
took sideways time asks — "Would she still be at work?" of a sister in Mexico
City — for chat). A nearest example is one point; a softmax regression fitted
on all of a tool's cards weighs every direction the examples share, so it
separates asks from near misses that lie close to both. Fitted on the cards
alone, it needs nothing the tool files do not bring: a new tool's examples
train it with no router change.

How: multinomial logistic regression, fitted by full-batch gradient descent
from zero weights (deterministic), with classes weighted to equal total mass
(the no-tool class has as many cards as the tools together) and an L2 penalty.
The vectors are unit-length sentence embeddings, multiplied by ``SCALE`` so the
probabilities can grow confident. The built-in tools' ~270 cards × 384
dimensions fit in about 0.4 s (2,000 cards of 20 tools: ~6.5 s), once per tool
list, on a worker thread (``ToolSelector.load``). ``SCALE``, ``L2`` and
``STEPS`` were picked on the tuning prompts' band turns (EVAL.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from services.router.planning.embedding import Vectors

SCALE = 10.0
L2 = 1e-2
STEPS = 800
LEARNING_RATE = 0.5


def _softmax(z: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    out: npt.NDArray[np.float64] = e / e.sum(axis=-1, keepdims=True)
    return out


@dataclass(frozen=True)
class CardClassifier:
    """Weights of a fitted classifier; class ``k`` is a tool index, or "no tool" at ``none_class``."""

    weights: npt.NDArray[np.float64]
    bias: npt.NDArray[np.float64]
    none_class: int

    @classmethod
    def fit(cls, vectors: Vectors, labels: npt.NDArray[np.int64], classes: int) -> CardClassifier:
        """Fit on ``vectors`` labelled ``labels`` in ``range(classes)``; the last class is "no tool"."""
        x = vectors.astype(np.float64) * SCALE
        n = len(labels)
        counts = np.bincount(labels, minlength=classes).astype(np.float64)
        weight = (n / (classes * np.maximum(counts, 1.0)))[labels][:, None] / n
        target = np.eye(classes)[labels]
        w = np.zeros((x.shape[1], classes))
        b = np.zeros(classes)
        for _ in range(STEPS):
            grad = (_softmax(x @ w + b) - target) * weight
            w -= LEARNING_RATE * (x.T @ grad + L2 * w)
            b -= LEARNING_RATE * grad.sum(axis=0)
        return cls(w, b, classes - 1)

    def _probabilities(self, vector: Vectors) -> npt.NDArray[np.float64]:
        return _softmax(vector.astype(np.float64) * SCALE @ self.weights + self.bias)

    def predict(self, vector: Vectors) -> tuple[int, float]:
        """The most probable class of one message vector, and its probability."""
        p = self._probabilities(vector)
        best = int(p.argmax())
        return best, float(p[best])

    def probability(self, vector: Vectors, label: int) -> float:
        """The probability of class ``label`` for one message vector."""
        return float(self._probabilities(vector)[label])
