"""The one number grammar: numbers as people write them, in digits and in words, read and written back.

Shared by the tools (a summary's "1081", the calculator reading "twelve") and the
router's planning (grounding, copy shapes), so the facts live in one place.
"""

from __future__ import annotations

import re

#: What a language's ``content_words`` writes for a number, in digits or words: one token for every value.
NUMBER_TOKEN = "<num>"

#: A number written in digits: "1,234", "12.5", "-3", "15%" (group 1 holds the percent sign); not part of a word
#: or of a longer decimal.
WRITTEN_NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(%?)")


def significant(value: float, digits: int = 10) -> str:
    """``value`` to ``digits`` significant digits without trailing zeros: "1081", "11.0231", "6.21371e-13"."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    rounded = float(f"{value:.{digits}g}")
    if rounded.is_integer() and abs(rounded) < 1e15:
        return str(int(rounded))
    return repr(rounded)


# Numbers written as words ("twelve", "twenty-five", "three hundred and five"): the calculator reads them, the
# router's copy shapes and grounding check find them, so the words are known in one place.
_SMALL_WORDS = (
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
)
_TENS_WORDS = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_SMALL = {w: i for i, w in enumerate(_SMALL_WORDS)}
_TENS = {w: 10 * i for i, w in enumerate(_TENS_WORDS, start=2)}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9}
_ALL_WORDS = sorted([*_SMALL, *_TENS, *_SCALES], key=lambda w: (-len(w), w))
_NUMBER_WORD = r"(?:" + "|".join(_ALL_WORDS) + r")"
#: A run of number words, joined by spaces, hyphens or "and" ("three hundred and five"); ``worded_numbers``
#: splits a run that is not one number ("two three").
WORDED_NUMBER = rf"\b{_NUMBER_WORD}(?:(?:-|\s+(?:and\s+)?){_NUMBER_WORD})*\b"
_RUN = re.compile(WORDED_NUMBER, re.IGNORECASE)
_TOKEN = re.compile(r"[a-z]+", re.IGNORECASE)


_FOLLOWS = {
    "": {"small", "teen", "tens", "hundred", "scale", "zero"},
    "small": {"hundred", "scale"},
    "teen": {"hundred", "scale"},
    "tens": {"small", "scale"},
    "hundred": {"small", "teen", "tens", "scale"},
    "scale": {"small", "teen", "tens"},
    "zero": set(),
}


def _kind(word: str) -> str:
    if word in _SMALL:
        return "zero" if word == "zero" else "small" if _SMALL[word] < 10 else "teen"
    return "tens" if word in _TENS else "hundred" if word == "hundred" else "scale"


def _read(words: list[str]) -> list[tuple[int, int, int]]:
    """(first, last, value) token indexes of each number in a run of number words ("and" tokens included)."""
    numbers: list[tuple[int, int, int]] = []
    first, last_index, total, current, last = -1, -1, 0, 0, ""
    for i, word in enumerate(w.lower() for w in words):
        if word == "and":
            if last not in ("hundred", "scale"):  # "twelve and seven": two numbers
                numbers.append((first, last_index, total + current))
                first, total, current, last = -1, 0, 0, ""
            continue
        kind = _kind(word)
        if kind not in _FOLLOWS[last]:
            numbers.append((first, last_index, total + current))
            first, total, current, last = -1, 0, 0, ""
        if first < 0:
            first = i
        if kind == "hundred":
            current = (current or 1) * 100
        elif kind == "scale":
            total += (current or 1) * _SCALES[word]
            current = 0
        else:
            current += _SMALL.get(word, 0) + _TENS.get(word, 0)
        last_index, last = i, kind
    if first >= 0:
        numbers.append((first, last_index, total + current))
    return [n for n in numbers if n[0] >= 0]


def worded_numbers(text: str) -> list[tuple[int, int, int]]:
    """(start, end, value) of each number written in words in ``text``: "twenty-five" is 25, "two three" two."""
    found: list[tuple[int, int, int]] = []
    for run in _RUN.finditer(text):
        tokens = list(_TOKEN.finditer(run.group(0)))
        for first, last, value in _read([t.group(0) for t in tokens]):
            found.append((run.start() + tokens[first].start(), run.start() + tokens[last].end(), value))
    return found


def words_to_digits(text: str) -> str:
    """``text`` with every number written in words as digits ("twelve times eleven" → "12 times 11")."""
    out, at = [], 0
    for start, end, value in worded_numbers(text):
        out.append(text[at:start] + str(value))
        at = end
    return "".join(out) + text[at:]
