"""Everyday arithmetic wording → the calculator's notation: "2 to the power of 10" is "2**10".

Why in the tool: a small model copies the user's words far more reliably than
it composes an expression, and a large one writes notation anyway; the tool
accepting both makes the argument right either way, whoever fills it. Only
whole phrases around numbers (or parenthesised groups) are rewritten, in an
order where longer phrases go first ("square root of" before "root of",
"divided by" before "by"); a leading question ("what is", "calculate") and a
trailing "?" or "=" are dropped. What is left is parsed by the calculator's
own strict grammar, so an unknown word is still a clear error, never a guess.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from services.runtime.numbers import WORDED_NUMBER, words_to_digits
from services.runtime.time_units import SECONDS

_NUM = r"-?(?:\d[\d,]*(?:\.\d+)?|\.\d+)"
#: An operand: a number, a parenthesised group without nesting, or a function call of one.
_OPERAND = rf"(?:{_NUM}%?|\([^()]*\)|[a-z]+\([^()]*\))"

_LEAD = re.compile(
    r"^\s*(?:(?:please|hey|ok|okay|so|now)\s*,?\s+)*(?:what(?:'s| is| are)|how much is|how much are|calculate|"
    r"compute|work out|evaluate|figure out|solve|find|tell me|can you (?:calculate|compute|work out|tell me))\b\s*"
    r"(?:the\s+)?",
    re.IGNORECASE,
)
_TAIL = re.compile(r"\s*(?:please|for me)?\s*[?=.!]*\s*$", re.IGNORECASE)

#: Time units in seconds, for "how many minutes are in 3 hours": how many of one unit another holds. The fixed
#: lengths are the shared table's; a counting problem's year is 365 days (and its decade and century follow),
#: and months count only against years (a month has no fixed number of days).
_SECONDS = {
    **{unit: int(seconds) for unit, seconds in SECONDS.items() if seconds >= 1},
    "year": 365 * int(SECONDS["day"]),
    "decade": 3650 * int(SECONDS["day"]),
    "century": 36500 * int(SECONDS["day"]),
}
_MONTHS = {"month": 1, "year": 12, "decade": 120, "century": 1200}
#: Each time unit's spellings, singular and plural.
_SPELLINGS = {
    "second": "seconds?|secs?",
    "minute": "minutes?|mins?",
    "hour": "hours?|hrs?",
    "day": "days?",
    "week": "weeks?",
    "fortnight": "fortnights?",
    "month": "months?",
    "year": "years?",
    "decade": "decades?",
    "century": "century|centuries",
}
_TIME_UNIT = "(?:" + "|".join(_SPELLINGS.values()) + ")"
_AN = r"(?:a|an|one|each|every|1)"
#: "seconds (are there) in 4 hours", "minutes in a week", "hours in a 365-day year".
_TIME_SPAN = re.compile(
    rf"\b(?:how many\s+)?(?P<small>{_TIME_UNIT})\s+(?:are\s+)?(?:there\s+)?in\s+(?:{_AN}\s+)?"
    rf"(?:(?P<count>{_NUM})(?:-(?P<inner>{_TIME_UNIT})\s+|\s+))?(?P<big>{_TIME_UNIT})\b",
    re.IGNORECASE,
)


def _time_unit(word: str) -> str:
    """The unit a spelling in ``_SPELLINGS`` stands for ("hrs" is "hour"); the word itself when none."""
    return next((u for u, spelled in _SPELLINGS.items() if re.fullmatch(spelled, word, re.IGNORECASE)), word)


def units_in(big: str, small: str) -> int | None:
    """How many ``small`` time units one ``big`` holds (hours in a day: 24); None when that is not a whole
    number or not fixed (days in a month). Weeks in a year: 52, as people count them."""
    big, small = _time_unit(big), _time_unit(small)
    if (small, big) == ("week", "year"):
        return 52
    table = _SECONDS if big in _SECONDS and small in _SECONDS else _MONTHS
    if big not in table or small not in table or table[big] % table[small]:
        return None
    return table[big] // table[small]


def _time_count(match: re.Match[str]) -> str:
    count, inner = match.group("count"), match.group("inner")
    ratio = units_in(inner or match.group("big"), match.group("small"))
    if ratio is None:
        return match.group(0)
    return f"{count}*{ratio}" if count else str(ratio)


def time_spans(text: str) -> str:
    """``text`` with "minutes in 3 hours" as "3*60" and "hours in a 365-day year" as "365*24"."""
    return _TIME_SPAN.sub(_time_count, text)


def _average(match: re.Match[str]) -> str:
    items = re.split(r"\s*,\s*(?:and\s+)?|\s+and\s+", match.group(1).strip())
    return f"avg({', '.join(i for i in items if i)})"


#: A fraction's denominator by its ordinal ("a fifth of 1000", "two thirds of 90"); "half" has its own rewrite.
_DENOMINATORS = {
    "third": 3,
    "quarter": 4,
    "fourth": 4,
    "fifth": 5,
    "sixth": 6,
    "seventh": 7,
    "eighth": 8,
    "ninth": 9,
    "tenth": 10,
    "twelfth": 12,
    "twentieth": 20,
    "hundredth": 100,
    "thousandth": 1000,
}
_ORDINAL = "(?:" + "|".join(_DENOMINATORS) + ")"


def _fraction(match: re.Match[str]) -> str:
    """ "a fifth of 1000" as "1000/5", "two thirds of 90" (its count already in digits) as "2*90/3"."""
    count = match.groupdict().get("count")
    whole = f"{match.group('whole')}/{_DENOMINATORS[match.group('part').lower()]}"
    return f"{count}*{whole}" if count else whole


_PERCENT_WORD = r"(?:percent(?:age)?|%)"
_LIST = rf"{_OPERAND}(?:\s*,\s*{_OPERAND})*\s*,?\s+and\s+{_OPERAND}"

#: (pattern, replacement) in order; each pattern sees the text as the earlier ones left it.
_REWRITES: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = tuple(
    (re.compile(p, re.IGNORECASE), r)
    for p, r in (
        (rf"(?:^|\bwhat\s+){_PERCENT_WORD} of\s+({_OPERAND})\s+is\s+({_OPERAND})", r"(\2/\1*100)"),
        (rf"({_OPERAND})\s+is what {_PERCENT_WORD} of\s+({_OPERAND})", r"(\1/\2*100)"),
        (rf"({_OPERAND})\s+(?:out\s+)?of\s+({_OPERAND})\s+as an? {_PERCENT_WORD}", r"(\1/\2*100)"),
        (rf"\b(?:the\s+)?(?:average|mean) of\s+({_LIST})", _average),
        (rf"\bsquare root of\s+({_OPERAND})", r"sqrt(\1)"),
        (rf"\bcube root of\s+({_OPERAND})", r"(\1)**(1/3)"),
        (rf"\b(?:the )?root of\s+({_OPERAND})", r"sqrt(\1)"),
        (rf"\bsqrt of\s+({_OPERAND})", r"sqrt(\1)"),
        (rf"({_OPERAND})\s+to the power of\s+({_OPERAND})", r"\1**\2"),
        (rf"({_OPERAND})\s+(?:raised )?to the\s+({_NUM})(?:st|nd|rd|th)?(?: power)?\b", r"\1**\2"),
        (rf"({_OPERAND})\s+squared\b", r"\1**2"),
        (rf"({_OPERAND})\s+cubed\b", r"\1**3"),
        (rf"\bhalf of\s+({_OPERAND})", r"\1/2"),
        (rf"(?<![\w.])(\d+/\d+)\s+of\s+({_OPERAND})", r"(\1)*\2"),
        (rf"\b(?:(?:a|an|one|1)\s+)?(?P<part>{_ORDINAL})\s+of\s+(?P<whole>{_OPERAND})", _fraction),
        (rf"\b(?P<count>{_NUM})\s+(?P<part>{_ORDINAL})s\s+of\s+(?P<whole>{_OPERAND})", _fraction),
        (rf"\b(?:double|twice)\s+({_OPERAND})", r"2*\1"),
        (rf"\btriple\s+({_OPERAND})", r"3*\1"),
        (rf"({_NUM})\s*(?:percent|per cent|pct)\b", r"\1%"),
        (rf"({_NUM}%)\s+off\s+(?:of\s+)?({_OPERAND})", r"(\2-\1 of \2)"),
        (rf"\badd\s+({_OPERAND})\s+(?:to|and)\s+({_OPERAND})", r"\2+\1"),
        (rf"\bsubtract\s+({_OPERAND})\s+from\s+({_OPERAND})", r"\2-\1"),
        (rf"\btake\s+({_OPERAND})\s+(?:away )?from\s+({_OPERAND})", r"\2-\1"),
        (rf"\bmultiply\s+({_OPERAND})\s+(?:by|and|with)\s+({_OPERAND})", r"\1*\2"),
        (rf"\bdivide\s+({_OPERAND})\s+by\s+({_OPERAND})", r"\1/\2"),
        (rf"\b(?:the )?(?:sum) of\s+({_OPERAND})\s+and\s+({_OPERAND})", r"\1+\2"),
        (rf"\b(?:the )?(?:product) of\s+({_OPERAND})\s+and\s+({_OPERAND})", r"\1*\2"),
        (r"\s+(?:multiplied by|times)\s+", "*"),
        (r"\s+(?:divided by|over)\s+", "/"),
        (r"\s+(?:plus|added to)\s+", "+"),
        (r"\s+minus\s+", "-"),
        (r"\s+(?:mod|modulo)\s+", "%"),
        (rf"(?<=\d)\s*x\s*(?={_NUM})", "*"),
    )
)


#: Binary operators as symbols or words, between two operands of an arithmetic span (``arithmetic_pattern``).
_SPAN_OPERATORS = (
    r"[+*/^x×÷%]",
    r"(?<![a-z])-|-(?![a-z])",  # not a hyphen between two words: "twenty-five" is one number
    "plus",
    "minus",
    "times",
    "multiplied by",
    "divided by",
    "over",
    "to the power of",
    "mod",
    "modulo",
    "percent of",
    "% of",
    "percent off",
    "% off",
)


def arithmetic_pattern() -> str:
    """A regular expression (case-insensitive, whole value) for a span of a message that *is* an arithmetic
    expression in the wording ``rewrite`` reads: numbers joined by operators or operator words ("7 times 8
    minus 5", "2 to the power of 10", "15% of 80", "23*47"), each optionally squared or cubed or under a
    prefix ("half of 10", "square root of 144", "double 65"), a verb form ("take 25 away from 300",
    "multiply 56 by 12"), a percentage question ("percent of 60 is 45"), an average ("average of 82, 90 and
    77") or a count of time units ("seconds are in 4 hours", "minutes in a week"); numbers in digits or words.

    Why: the router copies such a span as the calculator's expression instead of asking the model to
    compose one (the embedded 135M model wrote "5+3" for "5 to the power of 3" and "25-300" for "take 25
    away from 300", "4*60" for "seconds in 4 hours"); a message with no such span ("4 coffees at $3.75
    each") is still composed by the model.
    """
    number = rf"(?:-?(?:\d[\d,]*(?:\.\d+)?|\.\d+)|{WORDED_NUMBER})%?"
    prefix = (
        # A fraction with its article or count ("a fifth of", "two thirds of"): bare, "fifth of 1000" would be a
        # second option beside "a fifth of 1000", the same mention cut short, left to a generation to pick.
        rf"(?:(?:square|cube) root of|half of|double|twice|triple|(?:a|an|one) {_ORDINAL} of"
        rf"|{number} {_ORDINAL}s of) "
    )
    term = rf"\(*(?:{prefix})?{number}(?: (?:squared|cubed))?\)*"  # "(12 + 8) * 5": spans keep balanced parentheses
    operator = "|".join(_SPAN_OPERATORS)
    chain = rf"(?:{term}\s*(?:{operator})\s*)+{term}|{prefix}{number}(?: (?:squared|cubed))?|{number} (?:squared|cubed)"
    verbs = (
        rf"(?:subtract {number} from|take {number} (?:away )?from|add {number} (?:to|and)"
        rf"|multiply {number} (?:by|and|with)|divide {number} by|(?:the )?(?:sum|product) of {number} and) {number}"
    )
    percent = (
        rf"{_PERCENT_WORD} of {number} is {number}|{number} is what {_PERCENT_WORD} of {number}"
        rf"|{number} (?:out )?of {number} as an? {_PERCENT_WORD}"
    )
    average = rf"(?:average|mean) of {number}(?:, {number})*,? and {number}"
    time = "|".join(
        rf"(?:{_SPELLINGS[small]}) (?:are )?(?:there )?in (?:{_AN} )?"
        rf"(?:{number}-{bigs} {_TIME_UNIT}|(?:{number} )?{bigs})"
        for small in _SPELLINGS
        if (bigs := "(?:" + "|".join(_SPELLINGS[b] for b in _SPELLINGS if units_in(b, small)) + ")") != "(?:)"
    )
    # A calendar date ("2026-10-14") is written with minus signs but is no subtraction.
    not_a_date = r"(?!.*\b\d{4}-\d{1,2}-\d{1,2}\b)"
    return rf"(?i)^{not_a_date}(?:{chain}|{verbs}|{percent}|{average}|{time})$"


def rewrite(expression: str) -> str:
    """``expression`` with everyday wording turned into notation; notation passes through unchanged."""
    text = time_spans(words_to_digits(_TAIL.sub("", _LEAD.sub("", expression.strip()))))
    for pattern, replacement in _REWRITES:
        text = pattern.sub(replacement, text)
    return text.strip()
