"""The grounding check of filled arguments: every number must come from the conversation or its words.

A small model asked to fill arguments invents values (10.0, 10000001) when the
message does not hold them; an invented number is never right, so such a call is
dropped. But many correct calls use numbers the user did not type as digits:

- "twenty-five times four" → ``25*4``; "half of 10" → ``10/2``; "a third of 90" → ``90/3``; "double 21" → ``21*2``
  (number words and fraction words: half, third, quarter, double, twice, dozen…);
- "15% of 80" → ``0.15*80`` or ``15/100*80`` (a percentage as a fraction, and 100);
- "how many minutes in 3 hours" → ``3*60`` (unit constants: 60, 24, 7, 365, 12,
  1000, 3600…);
- "Now add 6 to that result" → ``1081+6`` (numbers of the context the filler saw:
  the previous answer).

A number is grounded when it is one of those. Anything else — a value in none of
the sources — still drops the call.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from services.tools.numbers import worded_numbers

_NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(%?)")

#: Numbers every filler may use: identities, and constants of everyday unit arithmetic.
CONSTANTS: frozenset[float] = frozenset([0, 1, 2, 100, 1000, 60, 24, 7, 12, 52, 365, 366, 3600, 1440, 86400, 1024])

#: Words that stand for numbers beside the number words themselves (``services.tools.numbers``: "twenty-five"
#: is 25): a fraction word gives its divisor and its value.
WORDS: dict[str, tuple[float, ...]] = {
    "dozen": (12,),
    "half": (2, 0.5),
    "halve": (2, 0.5),
    "third": (3,),
    "thirds": (3,),
    "quarter": (4, 0.25),
    "quarters": (4, 0.25),
    "fifth": (5, 0.2),
    "tenth": (10, 0.1),
    "double": (2,),
    "twice": (2,),
    "triple": (3,),
    "thrice": (3,),
    "squared": (2,),
    "square": (2,),
    "cubed": (3,),
    "cube": (3,),
    "percent": (100,),
    "per cent": (100,),
}


def numbers_in(text: str) -> set[float]:
    """Numbers written in ``text`` (1,234 and 12.5 and 15%), with what they imply (15% → 0.15, 100)."""
    found: set[float] = set()
    lowered = text.lower()
    for match in _NUMBER.finditer(lowered):
        literal = match.group(0).rstrip("%").replace(",", "")
        value = float(literal)
        found |= {value, abs(value)}
        if match.group(1) == "%":
            found |= {abs(value) / 100, 100.0}
    found.update(float(value) for _, _, value in worded_numbers(lowered))
    for word, values in WORDS.items():
        if re.search(rf"\b{word}\b", lowered):
            found.update(values)
    return found


def _values(value: Any) -> Iterable[float]:
    """Numbers in filled arguments: JSON numbers, and numbers inside strings (expressions)."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield float(value)
    elif isinstance(value, str):
        for match in _NUMBER.finditer(value):
            yield abs(float(match.group(0).rstrip("%").replace(",", "")))
    elif isinstance(value, dict):
        for v in value.values():
            yield from _values(v)
    elif isinstance(value, list):
        for v in value:
            yield from _values(v)


def grounded(*sources: str) -> set[float]:
    """Every number the sources (message, context) ground, with the constants."""
    allowed = set(CONSTANTS)
    for source in sources:
        allowed |= numbers_in(source)
    return allowed


def ungrounded(arguments: dict[str, Any], *sources: str) -> list[float]:
    """The numbers in ``arguments`` that no source (message, context) grounds; empty when all are grounded."""
    allowed = grounded(*sources)
    return [n for n in _values(arguments) if not _close_to_any(n, allowed)]


def number_pattern(*sources: str) -> str:
    """A regular expression (no anchors) for the grounded numbers, as written in the sources ("2.50", "1,450")
    and in plain notation ("2.5", "1450", "0.15" for "15%").

    Why: a composed argument (a calculator expression) is held to it by the fill's grammar, so the model
    cannot write a number nobody gave; asked for the area of "7 m by 9 m" the 135M model wrote ``5*9``,
    which the check above then dropped, leaving the turn with no tool at all.
    """
    literals = {_plain(value) for value in grounded(*sources)}
    for source in sources:
        literals |= {m.group(0).rstrip("%").lstrip("-") for m in _NUMBER.finditer(source)}
    return "(?:" + "|".join(re.escape(n) for n in sorted(literals, key=lambda n: (-len(n), n))) + ")"


def _plain(value: float) -> str:
    """``value`` in plain decimal notation: 60, 0.15, 1000000."""
    value = abs(value)
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.12f}".rstrip("0").rstrip(".")


def _close_to_any(number: float, allowed: set[float]) -> bool:
    return any(abs(number - a) <= 1e-9 * max(1.0, abs(a)) for a in allowed)
