"""Labels: a value the user wrote beside a property's name is that property's value.

People name the slot of a value as they write it: "in project QA", "page
the database team", "add 2 of product B07XJ8C8F5", "pharmacies near 5th and
Pine". A tool described only has no example call to show the fill which span
goes where, and the 135M model put a span in the wrong property or the same
span in two ("project": "flaky", "team": "lag", "query" and "near" both "5th
and Pine"). So the implied copy (``copying.implied_copy``) reads the labels:
a span written right after a word of a property's own name, up to a function
word or the clause's end ("project QA for ..."), or right before one, from a
function word ("the database team"; a clause's first words are its verb), is
*labelled* for that property (an article between label and span aside; of
two labelled spans, one inside the other, the inner one, nearest the label). A
property with labelled spans is offered those only; a span labelled for one
property is no option of another while that one has others left. After the
fill, an optional property the model left out gets the one value labelled for
it (``labelled_values``, read by ``formats.complete``).

Another form of a name's word labels too, and may have a glue word after it
("assigned to mkowalski" for ``assignee``, "created by dlee" for
``creator``), unless another property's name holds that word as well
("checking in" says neither ``check_in`` nor ``check_out``); the name itself
may not ("message to Bob" is no message). Over the spent sets 2-14's 620
one-tool asks: 424 -> 428 exact, none broken.

Besides the property's name, only the words that open its description are
read (``heading``: "Speaker or device name" labels "the kitchen speaker",
"Branch, tag or commit SHA" "the release-2.4 branch"): the rest of a
description's words are many and common ("of the repository") and would label
half a message. Over the spent blind sets 2–11's one-tool asks (478, each
filled for its right tool: ``evals.fill_alone``) the heading took exact calls
284 → 294 (devices, branches, an order number).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from services.router.planning.cards import name_words
from services.router.planning.spans import MAX_SPAN_WORDS, inside, spans, whole
from services.runtime.language import Language

#: Where a description's first phrase ends: a sentence or clause sign, or an opening bracket.
_FIRST_PHRASE = re.compile(r"[.,;:(]")
#: The most words of a description's first phrase read as labels (``heading``).
HEADING_WORDS = 2


def heading(description: str, language: Language) -> frozenset[str]:
    """The content words that open a property's description, up to a function word or a sign, two at most
    ("Speaker or device name": speaker; "Branch, tag or commit SHA": branch); a number or a sign is no label
    ("One-line": line, not the hyphen that "high-priority" also holds)."""
    out: set[str] = set()
    for word in _FIRST_PHRASE.split(description, maxsplit=1)[0].split()[:HEADING_WORDS]:
        content = language.content_words(word)
        if not content:
            break
        out |= content
    return frozenset(w for w in out if w.isalpha())


def labelled(
    offered: dict[str, list[str]],
    sources: Sequence[str],
    language: Language,
    descriptions: Mapping[str, str],
) -> dict[str, list[str]]:
    """Per property, those of its options (``offered``) written right beside a word of its name or of its
    description's heading (``descriptions``: ``heading``) in a clause of a source (see the module docstring); a
    property with none is left out."""
    texts = clause_words(sources, language)
    cues_of = {name: cues(name, descriptions.get(name, ""), language) for name in offered}
    out: dict[str, list[str]] = {}
    for name, options in offered.items():
        mine = cues_of[name]
        if not mine:
            continue
        # A form of a word that names two properties labels neither ("checking in": check_in or check_out?).
        forms = mine - {c for other, theirs in cues_of.items() if other != name for c in theirs}
        found = [
            o for o in options if not language.content_words(o) & mine and _beside(o, mine, forms, texts, language)
        ]
        # The value nearest the label: "to my Personal list" labels "Personal", not "Leo to my Personal".
        found = [o for o in found if not any(inside(p, o) for p in found)]
        if found:
            out[name] = found
    return out


def cues(name: str, description: str, language: Language) -> frozenset[str]:
    """The words that label a value of property ``name``: its name's content words and its description's
    ``heading``; read for a span (``labelled``) and for an amount (``quantities.owned``)."""
    return language.content_words(name_words(name)) | heading(description, language)


def at_cue(words: Sequence[str], j: int, cue_words: frozenset[str], language: Language) -> bool:
    """Whether ``words[j]`` exists and is a label: one of its content words is in ``cue_words``."""
    return 0 <= j < len(words) and bool(language.content_words(words[j]) & cue_words)


def around(words: Sequence[str], i: int, n: int, language: Language) -> tuple[int, int]:
    """The indices of the words right before and right after the ``n`` words at ``i``, an article between them
    skipped ("the database team": the label after "database" is "team"; "a 3 of us" aside)."""
    before = i - 1 - (i >= 1 and language.is_article(words[i - 1]))
    after = i + n + (i + n < len(words) and language.is_article(words[i + n]))
    return before, after


def clause_words(sources: Sequence[str], language: Language) -> list[list[str]]:
    """Each clause of each source that holds a word, as its words with their edge punctuation off: where a label
    is read, for a span (``labelled``) and for an amount (``quantities.owned``)."""
    return [
        words
        for source in sources
        for clause in language.span_clauses(source)
        if (words := [w for w in (whole(w) for w in clause.split()) if w])
    ]


def _beside(
    option: str, cues: frozenset[str], forms: frozenset[str], texts: Sequence[Sequence[str]], language: Language
) -> bool:
    """Whether ``option``'s words stand in a text right after a cue word and up to a function word or the end,
    or right before one and from a function word (a clause's first words are its verb); an article between
    cue and span aside. After another form of a word of ``forms`` (a cue no other property has), a glue word may
    stand between ("assigned to mkowalski" for ``assignee``)."""
    words = option.split()
    n = len(words)

    def cue(j: int) -> bool:
        return at_cue(text, j, cues, language)

    def form(j: int) -> bool:  # another form of a cue word: "assigned" of ``assignee``, "located" of ``location``
        return 0 <= j < len(text) and not cue(j) and any(language.mentions(text[j], c) for c in forms)

    def edge(j: int) -> bool:  # the clause's edge or a function word: where a written value ends
        return not 0 <= j < len(text) or not language.content_words(text[j])

    for text in texts:
        for i in range(len(text) - n + 1):
            if text[i : i + n] != words:
                continue
            before, after = around(text, i, n, language)
            # Before a cue, the span follows a function word: a clause's first words are its verb ("page the
            # database team", "tell project QA"), not a name.
            opens = i >= 1 and not language.content_words(text[i - 1])
            if (cue(before) and edge(i + n)) or (cue(after) and opens):
                return True
            # A form of the name, then a glue word: "assigned to mkowalski", "created by dlee", "titled as Q3".
            glued = before >= 1 and language.is_glue(text[before]) and form(before - 1)
            if (form(before) or glued) and edge(i + n):
                return True
    return False


def one_owner(per_property: dict[str, list[str]], labels: dict[str, list[str]]) -> dict[str, list[str]]:
    """Each property's options with its labelled ones alone when it has any, and less the spans labelled for
    another property while it keeps one option at least."""
    out = {}
    for name, options in per_property.items():
        own = labels.get(name, [])
        if own:
            out[name] = own
            continue
        taken = {o for other, spans in labels.items() if other != name for o in spans}
        out[name] = [o for o in options if o not in taken] or options
    return out


def labelled_values(props: dict[str, Any], arguments: dict[str, Any], text: str, language: Language) -> dict[str, str]:
    """The free-form string properties ``arguments`` left unset for which ``text`` labels exactly one value that
    no argument took ("add 'renew passport' to my Personal list": ``list`` is "Personal"); the fill leaves out
    an optional property it was shown no example of."""
    taken = {str(v) for v in arguments.values()}
    options = [o for o in spans(text, max_words=MAX_SPAN_WORDS, language=language) if _names_something(o, language)]
    unset = {
        name: [o for o in options if o not in taken]
        for name, prop in props.items()
        if name not in arguments
        and isinstance(prop, dict)
        and prop.get("type") == "string"
        and not {"enum", "const", "pattern", "format"} & set(prop)
    }
    found = labelled(unset, [text], language, descriptions(props))
    return {name: values[0] for name, values in found.items() if len(values) == 1}


def descriptions(props: dict[str, Any]) -> dict[str, str]:
    """Each property's description ("" where it has none): what ``labelled`` reads a heading from."""
    return {name: str(prop.get("description", "")) for name, prop in props.items() if isinstance(prop, dict)}


def _names_something(span: str, language: Language) -> bool:
    """A span that opens and closes on a content word ("Personal", not "my Personal")."""
    words = span.split()
    return bool(language.content_words(words[0])) and bool(language.content_words(words[-1]))


__all__ = [
    "around",
    "at_cue",
    "clause_words",
    "cues",
    "descriptions",
    "heading",
    "labelled",
    "labelled_values",
    "one_owner",
]
