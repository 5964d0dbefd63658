"""Span copying: a tool's string arguments copied from what the user wrote, and what the spans prove.

A small model copies well and composes badly (asked for a quantity it wrote
"3.00 grams" for "3 pounds"; a URL grew a path nobody typed), so a property a
tool marks with ``hints.COPY_KEYWORD`` is narrowed, for the fill's grammar, to
an enum of the message's own word spans that fit its shape. The same spans
feed the schema judge's rules: whether the message can fill the tool at all
(``applies``), whether its shape is evidence of the ask (``evident``), and
whether it names exactly the one value each copied argument needs (``pinned``).
A schema with no hint passes through untouched (``copy_constrained``), and
every rule here is then silent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from services.router.planning.cards import name_words, property_text
from services.router.planning.choices import written_choices
from services.router.planning.formats import listed, shaped
from services.router.planning.grounding import constants_for, number_pattern
from services.router.planning.hints import (
    COMPOSE_PATTERN_KEYWORD,
    CONSTANTS_KEYWORD,
    COPY_CONTEXT_KEYWORD,
    COPY_EVIDENT_KEYWORD,
    COPY_KEYWORD,
    COPY_MESSAGE,
    COPY_PREFER_KEYWORD,
    COPY_REQUIRED_KEYWORD,
    COPY_WORDS_KEYWORD,
    GROUNDED_NUMBER,
    HINT_PREFIX,
)
from services.router.planning.labels import descriptions, labelled, one_owner
from services.router.planning.notation import claimed, preferred
from services.router.planning.quantities import is_amount, numeric, owned
from services.router.planning.spans import (
    MAX_SPAN_WORDS,
    MAX_SPANS,
    fits,
    maximal,
    one_mention_one_argument,
    own_mentions,
    quotations,
    spans,
    verbatim,
    whole,
)
from services.runtime.language import ENGLISH

#: The longest span an implied copy offers besides whole clauses (``implied_copy``).
IMPLIED_SPAN_WORDS = 6


def copy_constrained(schema_json: str, *sources: str, implied: bool = False, tool_name: str = "") -> str:
    """The tool's schema with each copy property (``COPY_KEYWORD``) narrowed to the sources' spans that fit it.

    Why: a small model copies well and composes badly — asked for a quantity it
    wrote "3.00 grams" for "3 pounds", and a URL grew a path the user never
    typed. An enum of the message's spans makes the copy exact by construction;
    a property with no fitting span keeps its free-form schema (the tool then
    says what is wrong).

    ``implied``: the tool (``tool_name``) is described only and its schema holds no hint (its own lists narrowed
    by ``choices.written_choices``, then ``implied_copy``).
    """
    if implied and HINT_PREFIX not in schema_json:
        return implied_copy(written_choices(schema_json, sources, ENGLISH, tool_name), sources, tool_name)
    if COPY_KEYWORD not in schema_json:
        return schema_json
    schema, found, _ = copy_options(schema_json, sources)
    for name, options in one_mention_one_argument(found).items():
        if options:
            schema["properties"][name] = {"type": "string", "enum": options}
    return json.dumps(schema)


def implied_copy(schema_json: str, sources: Sequence[str], tool_name: str = "") -> str:
    """A hint-less schema with each free-form string property narrowed to the sources' word spans (up to
    ``IMPLIED_SPAN_WORDS`` words) or a whole clause of them.

    Why: a tool that brings only a name, a description and a schema has no example of its own to show the
    fill, and the 135M model wrote the property's name as its value ("origin": "origin", "city": "city" — 14 of
    the generality dev run's fills) or a value nobody said; grounding then dropped the call, and a right choice
    of tool became no call. Copied spans are grounded by construction. A property with an ``enum``, ``const`` or
    ``pattern`` keeps its own rule, one with a ``format`` is offered only the spans of its shape (``formats.py``),
    one whose description or examples give a shape the spans of it when the message holds one (``notation.py``);
    one the sources hold no span for keeps its schema. A list of a format is offered the values of that shape
    written, and left out of the fill when none is (``formats.listed``). A span of function words alone is no
    option (it let near misses fill a call: "how do I write a good bug report?" → a ticket titled "I").

    Four spans are no value of a property while another option is left: a span that starts or ends with a word
    naming the tool or one of its properties (the user's verb or the schema's own words: a to-do titled "add",
    a note whose body is "note", "order 88-2201" for ``order_id``, "Personal list" for ``list``); another
    property's span (``notation.claimed``: a value of its own list, a span holding a value of its format, "the
    date belongs to ``date``, not to ``event``", or the one span of its shape); a part of a quotation (the user
    quoted "Vendor sync" as one value); and a number alone while a numeric property takes it
    (``quantities.is_amount``: "2500" is the amount, not the currency). A
    quotation itself is offered first, whatever its length.
    """
    schema = json.loads(schema_json)
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return schema_json
    clauses = (whole(clause) for source in sources for clause in ENGLISH.span_clauses(source))
    # A quotation is one value whatever its length ("translate 'the meeting has been moved to Thursday' into
    # German": seven words, past the longest span, and a part of it is no value).
    found = dict.fromkeys(
        [*quotations(*sources), *(c for c in clauses if c), *spans(*sources, max_words=IMPLIED_SPAN_WORDS)]
    )
    options = [o for o in found if verbatim(o, sources) and ENGLISH.content_words(o)][:MAX_SPANS]
    if not options:
        return schema_json
    # The schema's own words (the tool's name, its properties' names).
    schema_words = ENGLISH.content_words(" ".join(name_words(n) for n in [tool_name, *props]))
    quoted = [f" {q} " for q in quotations(*sources)]
    # A time said on its own ("today", "in 20 minutes") is a value only of a property about time.
    times = {o for o in options if ENGLISH.says_when(o)}
    # Whatever the property: a span edged by a word of the schema's own names, or a part of a quotation.
    misplaced = {
        o
        for o in options
        if _schema_word(o.split()[0], schema_words)
        or _schema_word(o.split()[-1], schema_words)
        or any(f" {o} " in q and f" {o} " != q for q in quoted)
    }
    numbers = owned(props, sources, ENGLISH, descriptions(props))  # "200 a night": the price's, not the guests
    misplaced |= {o for o in options if is_amount(o, ENGLISH)} if any(numbers.values()) else set()
    offered: dict[str, list[str]] = {}
    unsaid = []  # optional properties with nothing written for them (a list of a format, an amount): left out
    for name, prop in props.items():
        if isinstance(prop, dict) and prop.get("type") == "array":
            narrowed = listed(prop, sources)
            if narrowed is not None:
                props[name] = narrowed
            elif name not in schema.get("required", ()):
                unsaid.append(name)
            continue
        if numeric(prop):
            # An amount the user wrote on its own, in the unit the property names (``quantities.py``).
            values = numbers[name]
            if values:
                props[name] = {"type": prop["type"], "enum": values}
            elif name not in schema.get("required", ()):
                unsaid.append(name)  # no amount written for it: its default stands
            continue
        if not isinstance(prop, dict) or prop.get("type") != "string" or {"enum", "const", "pattern"} & set(prop):
            continue
        # A format names the shape of its values (an address, a date): only spans of that shape fit it; a
        # description's notation or coded examples make its shape the preferred options (``notation.py``).
        if "format" in prop:
            fitting = shaped(str(prop["format"]), options)
        else:
            fitting = preferred(prop, [o for o in options if fits(prop, True, o)], name)
        unlikely = misplaced | claimed(props, name, fitting)  # another property's list value, format or shape
        unlikely |= set() if ENGLISH.about_time(property_text(name, prop)) else times
        fitting = [o for o in fitting if o not in unlikely] or fitting
        if fitting:
            offered[name] = fitting
    # A span written beside a property's name is that property's ("in project QA"): ``labels.py``.
    for name, fitting in one_owner(offered, labelled(offered, sources, ENGLISH, descriptions(props))).items():
        props[name] = {"type": "string", "enum": fitting}
    for name in unsaid:
        del props[name]
    return json.dumps(schema)


def _schema_word(word: str, schema_words: frozenset[str]) -> bool:
    """Whether ``word`` is one of the words naming a tool or its properties (a function word is not)."""
    content = ENGLISH.content_words(word)
    return bool(content) and content <= schema_words


def applies(schema_json: str, *sources: str) -> bool:
    """Whether the sources (the message first, then the earlier turn) hold a span for every property the tool
    marks ``COPY_REQUIRED_KEYWORD``, and an amount for every required one it composes from numbers.

    Why: a topic match is not an ask. "Why is a foot called a foot?" is near the
    unit converter's examples in meaning, but holds no quantity to convert; "add
    'buy rye flour' to my list" holds nothing to calculate; the tool's own
    schema says so, in the tool's file, with no router change.
    """
    if COPY_REQUIRED_KEYWORD not in schema_json and COMPOSE_PATTERN_KEYWORD not in schema_json:
        return True
    schema, found, marked = copy_options(schema_json, sources)
    own = own_mentions(found)
    required = schema.get("required", [])
    uncomposed = set(marked[COMPOSE_PATTERN_KEYWORD]) & set(required if isinstance(required, list) else [])
    return not uncomposed and all(own.get(name) for name in marked[COPY_REQUIRED_KEYWORD])


def unmentioned(schema_json: str, *sources: str) -> frozenset[str]:
    """The copy properties for which the sources hold no span of their own (a span inside another copy
    property's, such as the "km/h" of "130 km/h", is that property's mention, not this one's).

    Why: a tool chosen from one clause of a message may find only part of its
    ask there ("…the signs say 130 km/h, | what's that in mph?"); filled from
    that clause, the converter was asked for km/h in km/h.
    """
    if COPY_KEYWORD not in schema_json:
        return frozenset()
    own = own_mentions(copy_options(schema_json, sources)[1])
    return frozenset(name for name, options in own.items() if not options)


def evident(schema_json: str, message: str) -> bool:
    """Whether ``message`` holds a span for a property the tool marks ``COPY_EVIDENT_KEYWORD``.

    Why: the selector's embedding and intent words can leave an ask in the band
    that the tool's own shape recognises ("minutes in a week?", "what's twelve
    times eleven": no digit, so no intent word); the 135M model then often
    answered it by itself, wrongly.
    """
    if COPY_EVIDENT_KEYWORD not in schema_json:
        return False
    _, found, marked = copy_options(schema_json, (message,))
    found = _proving(schema_json, found)
    return any(found.get(name) for name in marked[COPY_EVIDENT_KEYWORD])


def _proving(schema_json: str, found: dict[str, list[str]]) -> dict[str, list[str]]:
    """The spans found, less those a property's ``COPY_EVIDENT_KEYWORD`` pattern does not match whole: a span of
    the copy shape that is also another thing's ("order 88-2201" for an expression) proves no ask."""
    props = json.loads(schema_json).get("properties", {})
    out = dict(found)
    for name, spans_ in found.items():
        shape = props.get(name, {}).get(COPY_EVIDENT_KEYWORD)
        if isinstance(shape, str):
            out[name] = [s for s in spans_ if re.fullmatch(shape, s, re.IGNORECASE)]
    return out


def pinned(schema_json: str, message: str) -> bool:
    """Whether ``message`` mentions exactly one value of its own for every property the tool copies from a span
    (a message-copied query does not count), and the tool has one at least.

    Why: an ask the selector leaves in the band for want of an intent word ("Is it past midnight in Hong
    Kong?", "I want to ring my sister in Mexico City. Would she still be at work?") is near the tool's examples
    and names the one place its argument needs; a near miss in the tool's topic names none ("Why is a foot
    called a foot?" has no target unit) or several ("the difference between GMT and UTC").
    """
    _, found, marked = copy_options(schema_json, (message,))
    spanned = marked[COPY_KEYWORD]
    if not spanned:
        return False
    own = own_mentions(_proving(schema_json, found))
    return all(len(own.get(name, [])) == 1 for name in spanned)


def copy_options(
    schema_json: str, sources: Sequence[str]
) -> tuple[dict[str, Any], dict[str, list[str]], dict[str, list[str]]]:
    """The schema with the copy keywords taken out (a copy property with no option held to its compose
    pattern), each copy property's options among the sources' spans, and per flag keyword
    (``COPY_REQUIRED_KEYWORD``, ``COPY_EVIDENT_KEYWORD``) the names of the properties it marks; under
    ``COPY_KEYWORD``, the properties copied from a span (every copy shape but ``COPY_MESSAGE``); under
    ``COMPOSE_PATTERN_KEYWORD``, those with no option whose pattern needs an amount the sources do not state."""
    schema = json.loads(schema_json)
    found: dict[str, list[str]] = {}
    flags = (COPY_REQUIRED_KEYWORD, COPY_EVIDENT_KEYWORD, COPY_KEYWORD, COMPOSE_PATTERN_KEYWORD)
    marked: dict[str, list[str]] = {flag: [] for flag in flags}
    for name, prop in schema.get("properties", {}).items():
        if not isinstance(prop, dict):
            continue
        shape = prop.pop(COPY_KEYWORD, None)
        max_words = prop.pop(COPY_WORDS_KEYWORD, MAX_SPAN_WORDS)
        searched = sources if prop.pop(COPY_CONTEXT_KEYWORD, True) else sources[:1]
        compose = prop.pop(COMPOSE_PATTERN_KEYWORD, None)
        constants = constants_for(prop.pop(CONSTANTS_KEYWORD, None), *sources)
        prefer = prop.pop(COPY_PREFER_KEYWORD, None)
        for flag in (COPY_REQUIRED_KEYWORD, COPY_EVIDENT_KEYWORD):
            if prop.pop(flag, False):
                marked[flag].append(name)
        if shape not in (None, COPY_MESSAGE):
            marked[COPY_KEYWORD].append(name)
        if shape and prop.get("type") == "string":
            if shape == COPY_MESSAGE:
                entire = whole(sources[0]) if sources else ""
                found[name] = [entire] if entire and fits(prop, True, entire) else []
            else:
                fitting = [s for s in spans(*searched, max_words=max_words) if fits(prop, shape, s)]
                preferred = [s for s in fitting if isinstance(prefer, str) and re.search(prefer, s)]
                fitting = preferred or fitting
                # Maximal first: a part of a longer mention stays hidden even when the whole is not verbatim
                # ("12 + 8" is part of "(12 + 8) * 3", and neither is the expression to copy).
                found[name] = [s for s in maximal(fitting) if verbatim(s, searched)][:MAX_SPANS]
            if not found[name] and isinstance(compose, str):
                # xgrammar takes no pattern beside length bounds: the fill's token limit and the tool bound it.
                prop.pop("minLength", None)
                prop.pop("maxLength", None)
                grounded = number_pattern(*sources, constants=sorted(constants))
                if grounded is None and GROUNDED_NUMBER in compose:  # no amount stated: nothing to compose from
                    marked[COMPOSE_PATTERN_KEYWORD].append(name)
                prop["pattern"] = "^$" if grounded is None else compose.replace(GROUNDED_NUMBER, grounded)
    return schema, found, marked
