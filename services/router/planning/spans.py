"""Word spans: the runs of words a message offers as values to copy, and the tests a copied value passes.

Shared by the hinted copy (``copying.copy_constrained``) and the implied copy
of a hint-less schema (``copying.implied_copy``): one definition of what a span
is (within a clause, glue words off its edges, parentheses whole), of a span
being written as the user wrote it (``verbatim``), of it fitting a
property's length and pattern (``fits``), and of one mention filling one
argument (``maximal``, ``one_mention_one_argument``, ``own_mentions``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from services.runtime.language import ENGLISH, Language

MAX_SPAN_WORDS = 4
MAX_SPANS = 256
_EDGE = "\"'`“”‘’()[]{}<>="
_KEPT_EDGE = _EDGE.replace("()", "")  # the edge a word keeps its parentheses inside


#: A quotation: a quote mark after a space (or at the start) up to its closing mark before a space or punctuation,
#: so the apostrophes of "don't" and "what's" open none.
_QUOTATION = re.compile(r"(?:^|(?<=[\s(\[]))['\"“‘]([^'\"“”‘’]{1,160}?)['\"”’](?=$|[\s.,;:!?)\]])")


def quotations(*texts: str) -> list[str]:
    """The texts the user put in quotes ("add 'call plumber' to my todos" → "call plumber"), in order."""
    return [m.group(1).strip() for text in texts for m in _QUOTATION.finditer(text) if m.group(1).strip()]


def spans(*texts: str, max_words: int = MAX_SPAN_WORDS, language: Language = ENGLISH) -> list[str]:
    """Every run of 1..``max_words`` words within one clause of ``texts``, edge punctuation off, in order,
    that neither starts nor ends with a glue word."""
    found: dict[str, None] = {}
    for text in texts:
        for clause in language.span_clauses(text):
            # Each word bare, and with its parentheses: "(12 + 8) * 5" is a span only with them.
            pairs = [(w.strip(_EDGE).rstrip(".,;:!?"), w.strip(_KEPT_EDGE).rstrip(".,;:!?")) for w in clause.split()]
            pairs = [p for p in pairs if p[0]]
            words = [bare for bare, _ in pairs]
            for i in range(len(words)):
                if language.is_glue(words[i]):
                    continue
                for j in range(i + 1, min(len(words), i + max_words) + 1):
                    if not (language.is_glue(words[j - 1]) or language.is_article(words[j - 1])):
                        # A span never cuts a parenthesis in half ("3+4)*(5-2" is no expression).
                        bare = " ".join(words[i:j])
                        if _whole_parentheses(bare):
                            found.setdefault(bare, None)
                        if any(kept != word for word, kept in pairs[i:j]):  # a word had parentheses
                            bracketed = " ".join(kept for _, kept in pairs[i:j])
                            if _whole_parentheses(bracketed):
                                found.setdefault(bracketed, None)
    return list(found)


def whole(text: str) -> str:
    """``text`` as one value: its whitespace single, edge punctuation and quotes off."""
    return " ".join(text.split()).strip(_EDGE + ".,;:!? ")


def _whole_parentheses(span: str) -> bool:
    """Whether every parenthesis in ``span`` is closed after it opens, and the span is not one wrapped whole
    ("(11 lb)" is offered bare)."""
    depth = 0
    for char in span:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            return False
    wrapped = span.startswith("(") and span.endswith(")") and _whole_parentheses(span[1:-1])
    return depth == 0 and not wrapped


def fits(prop: dict[str, Any], shape: object, value: str) -> bool:
    if not prop.get("minLength", 0) <= len(value) <= prop.get("maxLength", len(value)):
        return False
    patterns = [p for p in (prop.get("pattern"), shape) if isinstance(p, str)]
    return all(re.search(p, value) is not None for p in patterns)


def verbatim(span: str, sources: Sequence[str]) -> bool:
    """Whether ``span`` is written as it stands in a source: words whose edge punctuation was trimmed are not
    joined into something the user did not write ("(12 + 8) * 3" holds no "12 + 8 * 3")."""
    return any(span in " ".join(source.split()) for source in sources)


def one_mention_one_argument(found: dict[str, list[str]]) -> dict[str, list[str]]:
    """Per copy property, its options less those inside a longer option of another copy property.

    "How many feet is 3 meters?": the quantity is "3 meters", so "meters" is
    not the target unit — one mention fills one argument (the 135M model chose
    it 1 time in 3 on our probes). A property is never left with no option by this.
    """
    out = {}
    for name, options in found.items():
        others = _others(found, name)
        kept = [o for o in options if not any(inside(o, x) for x in others)]
        out[name] = kept or options
    return out


def own_mentions(found: dict[str, list[str]]) -> dict[str, list[str]]:
    """Per copy property, its options that are a mention of its own: not inside *every* option of the other
    copy properties ("kilos" beside "2 kilos" and "5 pounds" is a target for 5 pounds; "miles" beside "26.2
    miles" alone is not). May leave a property with none (``applies``, ``unmentioned``)."""
    out = {}
    for name, options in found.items():
        others = _others(found, name)
        out[name] = [o for o in options if not others or not all(inside(o, x) for x in others)]
    return out


def _others(found: dict[str, list[str]], name: str) -> list[str]:
    """The options of every copy property but ``name``."""
    return [o for other, opts in found.items() if other != name for o in opts]


def maximal(options: list[str]) -> list[str]:
    """The options that are not part of a longer one that is a single mention: "Mexico City" and not "Mexico",
    "fluid ounces" and not "ounces" — a shorter span inside it is the same mention, cut short. A longer span
    with a glue word inside ("meters to feet") is two mentions and hides neither."""
    single = [o for o in options if not any(ENGLISH.is_glue(w) for w in o.split()[1:-1])]
    return [o for o in options if not any(inside(o, other) for other in single)]


def inside(part: str, whole: str) -> bool:
    """Whether ``part`` is a shorter run of ``whole``'s words ("Mexico" in "Mexico City", not "Mexico" itself)."""
    return len(part) < len(whole) and f" {part} " in f" {whole} "
