"""Notation: the written shape of a property's values, read from its description or its examples.

A standard ``format`` names a value's shape (``formats.py``); many tools say it
in prose instead: "Local start time, 24h HH:MM", "Issue key like 'OPS-1423'",
"Airline code plus number, e.g. 'LH 401'", "Channel like '#general', or
'@username' for a DM". Shown no example call, the 135M model wrote the number
alone for "is BA 287 still on time?" and left the start time out of "Put
'Dentist' on my calendar for 2026-12-15 at 08:30". Two readings, both
language-free:

- **a notation** the description spells (``NOTATIONS``: "HH:MM", "YYYY-MM-DD")
  stands for that format's shape;
- **examples** (the schema's ``examples``, or values the description quotes)
  give their shape when every one is a *code*: each word holds a digit or a
  sign, or is capitals ("LH", "401", "OPS-1423", "#general"). An example in
  plain words ("Berlin", "in 20 minutes") says nothing about shape.

Letters match letters of either case, digits digits, a space an optional
space; signs are kept ("LH 401" fits "BA287", "#general" fits "#infra").

Two uses (``copying.implied_copy``, ``formats.complete``): the spans of the
shape are the property's options when the message holds one (a preference,
not a rule: "at 8am" keeps every span), and a property of a shape left unset
gets the one value of that shape the message writes and no argument took.
"""

from __future__ import annotations

import re
from typing import Any

from services.router.planning.spans import quotations, spans

#: The written shape of each format read here (``formats.py``) (the whole value must match).
SHAPES: dict[str, re.Pattern[str]] = {
    "email": re.compile(r"[^@\s]+@[^@\s]+\.[A-Za-z]{2,}"),
    "date": re.compile(r"\d{4}-\d{2}-\d{2}"),
    "date-time": re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"),
    "time": re.compile(r"\d{1,2}:\d{2}(?::\d{2})?"),
    "uri": re.compile(r"https?://\S+"),
    "url": re.compile(r"https?://\S+"),
}


#: Notations a description spells, and the format whose shape they stand for.
NOTATIONS: dict[str, str] = {"YYYY-MM-DD": "date", "HH:MM": "time"}

#: The runs an example is cut into: letters (joined by - _ . between letters), digits, spaces, any other sign.
_RUN = re.compile(r"(?P<letters>[^\W\d_]+(?:[-_.][^\W\d_]+)*)|(?P<digits>\d+)|(?P<space>\s+)|(?P<sign>.)")
_LETTERS = r"[^\W\d_]+(?:[-_.][^\W\d_]+)*"


def shape(prop: Any) -> re.Pattern[str] | None:
    """The written shape of ``prop``'s values from its description's notation or its coded examples; None
    when it has a ``format`` (``formats.py`` reads that), its own list or pattern, or says no shape."""
    if not isinstance(prop, dict) or prop.get("type") != "string":
        return None
    if any(key in prop for key in ("format", "enum", "const", "pattern")):
        return None
    description = str(prop.get("description", ""))
    for notation, format_name in NOTATIONS.items():
        if notation in description:
            return SHAPES[format_name]
    listed = prop.get("examples")
    examples = [e for e in listed if isinstance(e, str)] if isinstance(listed, list) else []
    examples += quotations(description)
    patterns = [_pattern(e) for e in examples]
    if not examples or None in patterns:
        return None
    return re.compile("|".join(f"(?:{p})" for p in patterns if p))


def _pattern(example: str) -> str | None:
    """The regex of a coded example's shape; None for an example in plain words."""
    words = example.split()
    if not words or not all(_coded(w) for w in words) or all(c.isalpha() or c.isspace() for c in example):
        return None  # capitals alone ("WEB") are a word's shape, not a code's
    out = []
    for run in _RUN.finditer(example.strip()):
        kind = run.lastgroup
        out.append({"letters": _LETTERS, "digits": r"\d+", "space": r"\s?"}.get(kind or "", re.escape(run.group())))
    return "".join(out)


def _coded(word: str) -> bool:
    """A word of a code: it holds a digit or a sign, or is two capitals or more ("LH", "401", "#general")."""
    return any(not c.isalpha() for c in word) or (len(word) > 1 and word.isupper())


def preferred(prop: Any, options: list[str]) -> list[str]:
    """The options of ``prop``'s shape (``shape``) when one is, else all of them."""
    pattern = shape(prop)
    return [o for o in options if pattern.fullmatch(o)] or options if pattern else options


def noted(props: dict[str, Any], arguments: dict[str, Any], text: str) -> dict[str, str]:
    """The properties of a shape (``shape``) ``arguments`` left unset for which ``text`` writes exactly one
    value of that shape that no argument took."""
    taken = {str(v) for v in arguments.values()}
    out: dict[str, str] = {}
    for name, prop in props.items():
        pattern = shape(prop) if name not in arguments else None
        if pattern is None:
            continue
        found = [s for s in spans(text, max_words=3) if pattern.fullmatch(s) and s not in taken]
        if len(found) == 1:
            out[name] = found[0]
    return out


__all__ = ["NOTATIONS", "SHAPES", "noted", "preferred", "shape"]
