"""String formats: a JSON Schema ``format`` read as the shape of the values a user writes for it.

A tool described only brings a schema, and a standard schema already says more
than its prose: ``{"type": "string", "format": "email"}`` is an address,
``"date"`` is YYYY-MM-DD. Two uses, both for tools that bring no example:

- **Options.** The implied copy (``copying.implied_copy``) offers a property
  with a format only the message's spans of that shape. Left free, the 135M
  model composed addresses nobody wrote ("email@partner.co" for "give
  sam@partner.co edit access", "budget-2026.xlsx@acme.com").
- **Completion.** The fill leaves out optional properties it was shown no
  example of; a date or address the user wrote then reached no argument
  ("Cancel the 'Vendor sync' on 2026-05-12" cancelled without the date). When
  the message holds exactly one value of a format that no argument took, and
  the schema has exactly one property of that format left unset, that value is
  the property's (``complete``). A list whose items have a format, left unset
  or empty, gets every untaken value of that shape ("invite priya@acme.io").
  A free-form property left unset for which the message labels one value
  gets it ("to my Personal list": ``labels.py``).

Only formats whose values have an unmistakable written shape are read; any
other format keeps its own rule.

An ``enum`` is read the same way: a property whose values the text writes
exactly one of gets that one ("any open tickets assigned to kenji?" →
``status: open``, where the model had written ``in_progress``; "bump it to
urgent" → ``priority: urgent``), by the reading ``choices.written`` also
narrows the fill's grammar with (a value's words or their stems; of two, not
a word of the tool's name: "merge #88 with a rebase").
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from services.router.planning.choices import apart, coded, switched, written
from services.router.planning.labels import descriptions, labelled_values
from services.router.planning.notation import SHAPES, noted, values_in
from services.router.planning.quantities import unclaimed
from services.runtime.language import ENGLISH


def shaped(format_name: str, options: Iterable[str]) -> list[str]:
    """The options whose whole text has the written shape of ``format_name`` ([] for a format not read here)."""
    shape = SHAPES.get(format_name)
    if shape is None:
        return []
    return [o for o in options if shape.fullmatch(o)]


def listed(prop: dict[str, Any], sources: Sequence[str]) -> dict[str, Any] | None:
    """A list whose items have a read format, its items narrowed to the values of that shape the sources write
    (as many as written); None when they write none; any other list unchanged.

    Why: shown no example, the 135M model filled a list of attendees nobody named with invented addresses
    until the token limit, and the call was dropped as unparseable; the implied copy leaves such an optional
    list out of the fill (``copying.implied_copy``).
    """
    items = prop.get("items")
    if not isinstance(items, dict) or items.get("format") not in SHAPES:
        return prop
    found = list(dict.fromkeys(v for source in sources for v in values_in(str(items["format"]), source)))
    return {**prop, "items": {**items, "enum": found}, "maxItems": len(found)} if found else None


def complete(schema_json: str, arguments: dict[str, Any], text: str, tool_name: str = "") -> dict[str, Any]:
    """``arguments`` with each value of a read format that ``text`` states once and no argument took, set on
    the one property of that format left unset (see the module docstring); unchanged otherwise."""
    try:
        schema = json.loads(schema_json or "{}")
    except json.JSONDecodeError:
        return arguments
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return arguments
    taken = {str(v) for v in arguments.values()}
    out = dict(arguments)
    for name, prop in props.items():
        items = prop.get("items") if isinstance(prop, dict) and prop.get("type") == "array" else None
        if isinstance(items, dict) and not out.get(name):  # a list of addresses the fill left empty
            found = [v for v in values_in(str(items.get("format", "")), text) if v not in taken]
            if found:
                out[name] = found
                taken.update(found)
    for format_name in SHAPES:
        unset = [
            name
            for name, prop in props.items()
            if isinstance(prop, dict) and prop.get("format") == format_name and name not in arguments
        ]
        left = [v for v in values_in(format_name, text) if v not in taken]
        if len(unset) == 1 and len(left) == 1:
            out[unset[0]] = left[0]
    codes_of = coded(props, [text], ENGLISH)
    for name, codes in codes_of.items():  # "42.50 in euros": the currency's code
        if len(codes) == 1:
            out[name] = codes[0]
    out.update(apart(codes_of, out))  # a rate from EUR to EUR: the second is the other currency named
    for name, prop in props.items():
        named = written(prop, [text], ENGLISH, tool_name)  # a value of its own list written (``choices.py``)
        if len(named) == 1:
            out[name] = named[0]
        elif name not in out and switched(name, prop, [text], ENGLISH, tool_name):  # "shuffled": ``shuffle``
            out[name] = True
    out.update(labelled_values(props, out, text, ENGLISH))  # "to my Personal list": ``list`` (``labels.py``)
    out.update(noted(props, out, text))  # "is BA 287 on time?": a shape the description gives (``notation.py``)
    out.update(unclaimed(props, out, text, ENGLISH, descriptions(props)))  # an amount left out (``quantities.py``)
    return out


__all__ = ["SHAPES", "complete", "listed", "shaped", "values_in"]
