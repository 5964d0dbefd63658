"""Quantities: the amounts a user wrote, as a numeric property of a tool described only takes them.

A tool described only shows the fill no example call, and the 135M model
wrote numbers the user never meant: ``duration_minutes: 2026`` (the year of
"free for an hour on 2026-02-17"), ``since_minutes: 2`` for "the last 2
hours", and picked the amount for a name (``base: "2500"`` for "2500 euros").
It also wrote one amount in two properties (``guests: 200`` for "nothing
over 200 a night") and left out amounts it was shown no example of. Five
facts:

- An amount is a number written on its own (``Language.quantities``): not a
  piece of a date, a time, a version or an id.
- An amount is a numeric property's value, not a name: while a numeric
  property of the tool takes one, a string property is not offered a span
  that is a number alone ("2500 euros" is the amount, not the currency to
  convert from; "the last 2 hours" is the window, not the service).
- A property whose name names a time unit (``since_minutes``,
  ``timeout_seconds``) takes an amount written with another time unit in its
  own unit ("2 hours" is 120 minutes, "an hour" 60), by the shared table
  (``services.runtime.time_units``).

- An amount written right beside a word of a numeric property's name or of
  its description's heading, or a time unit beside the amount of a property
  that names one, is that property's (``owned``): "nothing over 200 a night"
  is ``max_price_per_night``'s, and not ``guests``'s, whose "3 of us" no word
  labels — the labels of strings (``labels.py``) read for numbers. A numeric
  property left with no amount is left out of the fill when it is optional.
- An amount the fill put in no argument is lost to the user: when one
  numeric property is left unset and one amount the message writes is held
  by no argument and fits it, it is that property's (``unclaimed``: "for 3
  people" is ``guests``, "worth 50000 or more" ``min_amount``).

Over the spent blind sets 2-14's 620 one-tool asks, each filled for its right
tool (``evals.fill_alone``'s code): 395 -> 407 exact with the last two, none
broken.

The implied copy (``copying.implied_copy``) offers a numeric property only
these values (an integer property the whole ones); grounding
(``grounding.ground``) accepts a converted value for the property that names
the unit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from services.router.planning.cards import name_words
from services.router.planning.labels import around, at_cue, clause_words, cues
from services.runtime.language import Language
from services.runtime.time_units import in_unit


def unit_of(name: str, language: Language) -> str | None:
    """The time unit a property's name names ("since_minutes": minute), else None."""
    return next((u for w in name_words(name).split() if (u := language.time_unit(w))), None)


def amounts(name: str, prop: dict[str, Any], sources: Sequence[str], language: Language) -> list[float | int]:
    """The values the sources offer property ``name`` (see the module docstring), in order, each once."""
    return list(dict.fromkeys(_written(name, prop, sources, language).values()))


def _written(name: str, prop: dict[str, Any], sources: Sequence[str], language: Language) -> dict[float, float | int]:
    """Per number the sources write on its own, the value it gives property ``name`` (in the unit the name
    names; an integer property takes the whole ones only)."""
    unit = unit_of(name, language)
    out: dict[float, float | int] = {}
    for source in sources:
        for number, written in language.quantities(source):
            value = in_unit(number, written, unit) if unit is not None and written is not None else number
            if prop.get("type") != "integer":
                out.setdefault(number, value)
            elif value.is_integer():
                out.setdefault(number, int(value))
    return out


def owned(
    props: dict[str, Any], sources: Sequence[str], language: Language, descriptions: dict[str, str]
) -> dict[str, list[float | int]]:
    """Per numeric property, the amounts it may take (within its bounds): those labelled for it alone when it has
    any, else those not labelled for another (see the module docstring)."""
    written = {
        name: {n: v for n, v in _written(name, prop, sources, language).items() if within(prop, v)}
        for name, prop in props.items()
        if numeric(prop)
    }
    labels = {name: sorted(_labelled(name, descriptions.get(name, ""), sources, language)) for name in written}
    taken = {n for numbers in labels.values() for n in numbers}
    # Unlike a span, an amount labelled for another property is no option at all ("just me, under 150 a night":
    # 150 is no count of guests): a property left with none is left out, or to the model when it is required.
    kept = {name: labels[name] or [n for n in values if n not in taken] for name, values in written.items()}
    return {name: list(dict.fromkeys(written[name][n] for n in numbers)) for name, numbers in kept.items()}


def _labelled(name: str, description: str, sources: Sequence[str], language: Language) -> set[float]:
    """The numbers the sources write right before or after (an article aside) a word of property ``name``'s name
    or its description's heading, or right before a time unit when the name names one ("30 minutes")."""
    labels = cues(name, description, language)
    timed = unit_of(name, language) is not None
    out = set()
    for words in clause_words(sources, language):
        for i, word in enumerate(words):
            found = language.quantities(word)
            if len(found) != 1:
                continue
            before, after = around(words, i, 1, language)
            unit = i + 1 < len(words) and language.time_unit(words[i + 1]) is not None
            if at_cue(words, before, labels, language) or at_cue(words, after, labels, language) or (timed and unit):
                out.add(found[0][0])
    return out


def unclaimed(
    props: dict[str, Any], arguments: dict[str, Any], text: str, language: Language, descriptions: dict[str, str]
) -> dict[str, float | int]:
    """The one numeric property ``arguments`` left unset, with the one amount ``text`` writes that it may take
    and no argument holds (a number argument's value, or a number written in a string argument); nothing when
    either is not one (see the module docstring)."""
    held: set[float] = set()
    for value in arguments.values():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            held.add(float(value))
        elif isinstance(value, str):
            held.update(number for number, _ in language.quantities(value))
    left = {
        name: [v for v in values if float(v) not in held]
        for name, values in owned(props, [text], language, descriptions).items()
        if name not in arguments
    }
    left = {name: values for name, values in left.items() if values}
    if len(left) != 1:
        return {}
    ((name, values),) = left.items()
    return {name: values[0]} if len(values) == 1 else {}


def numeric(prop: Any) -> bool:
    """Whether a property takes an amount: a number or an integer not limited to listed values."""
    return isinstance(prop, dict) and prop.get("type") in {"integer", "number"} and not {"enum", "const"} & set(prop)


def is_amount(span: str, language: Language) -> bool:
    """Whether ``span`` is one number written on its own and nothing else ("2,500", "$100"; not "2 hours")."""
    return len(span.split()) == 1 and len(language.quantities(span)) == 1


def within(prop: dict[str, Any], value: float) -> bool:
    """Whether ``value`` meets the property's ``minimum`` and ``maximum``, where it states them."""
    low, high = prop.get("minimum"), prop.get("maximum")
    return (not isinstance(low, (int, float)) or value >= low) and (not isinstance(high, (int, float)) or value <= high)


__all__ = ["amounts", "is_amount", "numeric", "owned", "unclaimed", "unit_of", "within"]
