"""Degenerate answers to plain chat: empty, an echo of the user's message, the system prompt recited, or a loop.

Why: greedy decoding on the embedded 135M model answers everyday chat badly
in four recognisable ways (issue 34: 13 of 20 everyday prompts), and a
penalty against repetition is chosen by how often it still does. Each check
is on lower-cased words (letters and digits, with inner apostrophes), so
punctuation and case never decide a verdict:

- ``empty``: the answer has no words.
- ``echo``: the answer is the message, word for word; or a message of at
  least ``ECHO_MIN_WORDS`` words appears whole in the answer and makes up at
  least ``ECHO_SHARE`` of its words ("Hello! How are you today?" answered
  "Hello! How are you today? I'm fine" is an echo; "Good morning!" answered
  "Good morning! How can I help you today?" is a greeting, not one).
- ``system_prompt``: the answer repeats ``RECITE_WORDS`` consecutive words of
  the system prompt that the message did not say first (introducing itself by
  name, "I'm AgentMesh, a helpful assistant", is fewer).
- ``loop``: some run of 4 words occurs ``LOOP_REPEATS`` times or more in the
  answer (overlaps counted: "a a a a a a" loops).

A verdict lists every reason that holds; an answer is degenerate when any does.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

ECHO_MIN_WORDS = 3
ECHO_SHARE = 0.5
RECITE_WORDS = 8
LOOP_WORDS = 4
LOOP_REPEATS = 3
REASONS = ("empty", "echo", "system_prompt", "loop")

_WORD = re.compile(r"[a-z0-9]+(?:['’][a-z0-9]+)*")


def words(text: str) -> list[str]:
    """The text's words, lower-cased, apostrophes kept inside words ("I'm" is one word)."""
    return [w.replace("’", "'") for w in _WORD.findall(text.lower())]


def _grams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def _contains(haystack: Sequence[str], needle: Sequence[str]) -> bool:
    n = len(needle)
    return any(tuple(haystack[i : i + n]) == tuple(needle) for i in range(len(haystack) - n + 1))


@dataclass(frozen=True)
class Verdict:
    """What is wrong with an answer (``reasons``, in ``REASONS`` order); nothing for a fine one."""

    reasons: tuple[str, ...] = ()

    @property
    def degenerate(self) -> bool:
        return bool(self.reasons)


def is_echo(answer: Sequence[str], message: Sequence[str]) -> bool:
    if not message or not answer:
        return False
    if list(answer) == list(message):
        return True
    return len(message) >= ECHO_MIN_WORDS and len(message) >= ECHO_SHARE * len(answer) and _contains(answer, message)


def recites(answer: Sequence[str], system_prompt: Sequence[str], message: Sequence[str]) -> bool:
    prompt_runs = set(_grams(system_prompt, RECITE_WORDS))
    said = set(_grams(message, RECITE_WORDS))
    return any(g in prompt_runs and g not in said for g in _grams(answer, RECITE_WORDS))


def loops(answer: Sequence[str]) -> bool:
    counts = Counter(_grams(answer, LOOP_WORDS))
    return bool(counts) and max(counts.values()) >= LOOP_REPEATS


def judge(answer: str, message: str, system_prompt: str) -> Verdict:
    """The verdict on ``answer`` to ``message`` under ``system_prompt`` (see module docstring)."""
    a, m, s = words(answer), words(message), words(system_prompt)
    if not a:
        return Verdict(("empty",))
    found = {
        "echo": is_echo(a, m),
        "system_prompt": recites(a, s, m),
        "loop": loops(a),
    }
    return Verdict(tuple(reason for reason in REASONS if found.get(reason)))
