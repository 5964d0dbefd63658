"""Notation: the written shape of a property's values, read from its description or its examples.

A standard ``format`` names a value's shape (``formats.py``); many tools say it
in prose instead: "Local start time, 24h HH:MM", "Issue key like 'OPS-1423'",
"Airline code plus number, e.g. 'LH 401'", "Channel like '#general', or
'@username' for a DM". Shown no example call, the 135M model wrote the number
alone for "is BA 287 still on time?" and left the start time out of "Put
'Dentist' on my calendar for 2026-12-15 at 08:30". Four readings:

- **a notation** the description spells (``NOTATIONS``: "HH:MM", "YYYY-MM-DD")
  stands for that format's shape;
- **a template** of parts joined by a slash ("Repository as owner/name") is a
  value of as many parts (two content words: "and/or" is no template);
- **examples** (the schema's ``examples``, or values the description quotes)
  give their shape when every one is a *code*: each word holds a digit or a
  sign, or is capitals ("LH", "401", "OPS-1423", "#general"). An example in
  plain words ("Berlin", "in 20 minutes") says nothing about shape;
- **an identifier**: a property whose name says it takes one
  (``Language.names_identifier``: "order_id", "ticket_id") and whose
  description gives no shape takes one code word ("W55120", not "W55120
  showed up cracked"; "INFRA-88", not "Bump INFRA-88").

Letters match letters of either case, digits digits, a space an optional
space; signs are kept ("LH 401" fits "BA287", "#general" fits "#infra").

Three uses (``copying.implied_copy``, ``formats.complete``): the spans of the
shape are the property's options when the message holds one (a preference,
not a rule: "at 8am" keeps every span); they are no other property's while
that one has options left (``claimed``: the 135M model wrote the repository as
the branch too); and a property of a shape left unset gets the one value of
that shape the message writes and no argument took. The formats' own shapes
(``SHAPES``) are here too, so that one module says what a value looks like.
"""

from __future__ import annotations

import re
from typing import Any

from services.router.planning.cards import name_words
from services.router.planning.spans import quotations, spans, whole
from services.runtime.language import ENGLISH

#: The written shape of each format read (``formats.py``; the whole value must match).
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

#: A description's template of parts joined by a slash ("owner/name"; "and/or" names no part), and its shape.
_PARTS = re.compile(r"(?<![\w/])([a-z]+)/([a-z]+)(?![\w/])")
_PARTED = re.compile(r"[^\s/]+/[^\s/]+")
#: The runs an example is cut into: letters (joined by - _ . between letters), digits, spaces, any other sign.
_RUN = re.compile(r"(?P<letters>[^\W\d_]+(?:[-_.][^\W\d_]+)*)|(?P<digits>\d+)|(?P<space>\s+)|(?P<sign>.)")
_LETTERS = r"[^\W\d_]+(?:[-_.][^\W\d_]+)*"
#: An identifier's shape: one code word (a digit or a sign in it, an apostrophe aside, or capitals), a letter or digit
#: in it.
_IDENTIFIER = re.compile(r"(?=\S*[^\W_])\S*(?:\d|_|[^\w\s'’])\S*|[A-Z]{2,}")


def shape(prop: Any, name: str = "") -> re.Pattern[str] | None:
    """The written shape of ``prop``'s values from its description's notation, its slash template, its coded
    examples or its ``name`` naming an identifier; None when it has a ``format`` (``formats.py`` reads that),
    its own list or pattern, or says no shape."""
    if not isinstance(prop, dict) or prop.get("type") != "string":
        return None
    if any(key in prop for key in ("format", "enum", "const", "pattern")):
        return None
    description = str(prop.get("description", ""))
    for notation, format_name in NOTATIONS.items():
        if notation in description:
            return SHAPES[format_name]
    if any(ENGLISH.content_words(a) and ENGLISH.content_words(b) for a, b in _PARTS.findall(description)):
        return _PARTED  # "Repository as owner/name."
    listed = prop.get("examples")
    examples = [e for e in listed if isinstance(e, str)] if isinstance(listed, list) else []
    examples += quotations(description)
    patterns = [_pattern(e) for e in examples]
    if examples and None not in patterns:
        return re.compile("|".join(f"(?:{p})" for p in patterns if p))
    if name and ENGLISH.names_identifier(name_words(name)):
        return _IDENTIFIER  # "order_id": "W55120", not "W55120 showed"
    return None


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


def values_in(format_name: str, text: str) -> list[str]:
    """The values of ``format_name``'s shape written in ``text``, in order, each once."""
    shape = SHAPES.get(format_name)
    if shape is None:
        return []
    found = (whole(w) for w in text.split())  # a word's edge punctuation and quotes are not the value's
    return list(dict.fromkeys(w for w in found if shape.fullmatch(w)))


def claimed(props: dict[str, Any], name: str, options: list[str]) -> set[str]:
    """The options that are another property's: a value of its own list ("deals in negotiation": the stage's,
    not the owner), an option holding a value of its ``format`` where this property takes another
    ("2026-05-12 and don't send notifications" is no event title), or the one option of its shape (``shape``:
    "acme/web" is the repository, not the branch)."""
    own = props[name].get("format") if isinstance(props.get(name), dict) else None
    out: set[str] = set()
    for other, prop in props.items():
        item = prop.get("items") if isinstance(prop, dict) and prop.get("type") == "array" else prop
        if other == name or not isinstance(item, dict):
            continue
        listed = {str(v).lower().replace("_", " ") for v in item.get("enum", ()) if isinstance(v, str)}
        out.update(o for o in options if o.lower() in listed)
        if "format" in item and item["format"] != own:
            out.update(o for o in options if values_in(str(item["format"]), o))
        pattern = shape(item, other)
        fit = [o for o in options if pattern and pattern.fullmatch(o)]
        out.update(fit if len(fit) == 1 else ())  # of two ("acme/web from feature/x"), either may be this one's
    return out


def preferred(prop: Any, options: list[str], name: str = "") -> list[str]:
    """The options of the shape of ``prop`` (named ``name``: ``shape``) when one is, else all of them."""
    pattern = shape(prop, name)
    return [o for o in options if pattern.fullmatch(o)] or options if pattern else options


def noted(props: dict[str, Any], arguments: dict[str, Any], text: str) -> dict[str, str]:
    """The properties of a shape (``shape``) ``arguments`` left unset for which ``text`` writes exactly one
    value of that shape that no argument took."""
    taken = {str(v) for v in arguments.values()}
    out: dict[str, str] = {}
    for name, prop in props.items():
        pattern = shape(prop, name) if name not in arguments else None
        if pattern is None:
            continue
        found = [s for s in spans(text, max_words=3) if pattern.fullmatch(s) and s not in taken]
        if len(found) == 1:
            out[name] = found[0]
    return out


__all__ = ["NOTATIONS", "SHAPES", "claimed", "noted", "preferred", "shape", "values_in"]
