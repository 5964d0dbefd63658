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

_NUMBER_WORDS = {
    "zero": "0",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
    "eleven": "11",
    "twelve": "12",
    "twenty": "20",
    "hundred": "100",
}

#: (pattern, replacement) in order; each pattern sees the text as the earlier ones left it.
_REWRITES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p, re.IGNORECASE), r)
    for p, r in (
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
        (rf"\b(?:a |one )?third of\s+({_OPERAND})", r"\1/3"),
        (rf"\b(?:a |one )?quarter of\s+({_OPERAND})", r"\1/4"),
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
    r"[-+*/^x×÷%]",
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
    prefix ("half of 10", "square root of 144", "double 65"), or a verb form ("take 25 away from 300",
    "multiply 56 by 12").

    Why: the router copies such a span as the calculator's expression instead of asking the model to
    compose one (the embedded 135M model wrote "5+3" for "5 to the power of 3" and "25-300" for "take 25
    away from 300"); a message with no such span ("how many minutes in 3 hours") is still composed by the
    model.
    """
    number = r"-?(?:\d[\d,]*(?:\.\d+)?|\.\d+)%?"
    prefix = r"(?:(?:square|cube) root of|half of|double|twice|triple|(?:a |one )?(?:third|quarter) of) "
    term = rf"(?:{prefix})?{number}(?: (?:squared|cubed))?"
    operator = "|".join(_SPAN_OPERATORS)
    chain = rf"(?:{term}\s*(?:{operator})\s*)+{term}|{prefix}{number}(?: (?:squared|cubed))?|{number} (?:squared|cubed)"
    verbs = (
        rf"(?:subtract {number} from|take {number} (?:away )?from|add {number} (?:to|and)"
        rf"|multiply {number} (?:by|and|with)|divide {number} by|(?:the )?(?:sum|product) of {number} and) {number}"
    )
    return rf"(?i)^(?:{chain}|{verbs})$"


def rewrite(expression: str) -> str:
    """``expression`` with everyday wording turned into notation; notation passes through unchanged."""
    text = _TAIL.sub("", _LEAD.sub("", expression.strip()))
    text = re.sub(
        r"\b(" + "|".join(_NUMBER_WORDS) + r")\b",
        lambda m: _NUMBER_WORDS[m.group(1).lower()],
        text,
        flags=re.IGNORECASE,
    )
    for pattern, replacement in _REWRITES:
        text = pattern.sub(replacement, text)
    return text.strip()
