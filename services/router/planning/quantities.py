"""Quantities: the amounts a user wrote, as a numeric property of a tool described only takes them.

A tool described only shows the fill no example call, and the 135M model
wrote numbers the user never meant: ``duration_minutes: 2026`` (the year of
"free for an hour on 2026-02-17"), ``since_minutes: 2`` for "the last 2
hours", and picked the amount for a name (``base: "2500"`` for "2500 euros").
Three facts:

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

The implied copy (``copying.implied_copy``) offers a numeric property only
these values (an integer property the whole ones); grounding
(``grounding.ground``) accepts a converted value for the property that names
the unit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from services.router.planning.cards import name_words
from services.runtime.language import Language
from services.runtime.time_units import in_unit


def unit_of(name: str, language: Language) -> str | None:
    """The time unit a property's name names ("since_minutes": minute), else None."""
    return next((u for w in name_words(name).split() if (u := language.time_unit(w))), None)


def amounts(name: str, prop: dict[str, Any], sources: Sequence[str], language: Language) -> list[float | int]:
    """The values the sources offer property ``name`` (see the module docstring), in order, each once."""
    unit = unit_of(name, language)
    out: dict[float | int, None] = {}
    for source in sources:
        for number, written in language.quantities(source):
            value = in_unit(number, written, unit) if unit is not None and written is not None else number
            if prop.get("type") == "integer":
                if not value.is_integer():
                    continue
                out.setdefault(int(value), None)
            else:
                out.setdefault(value, None)
    return list(out)


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


__all__ = ["amounts", "is_amount", "numeric", "unit_of", "within"]
