"""Choices: a value from a property's own list that the user wrote is that property's value.

A tool described only shows the fill no example call, and with an ``enum`` of
its own a property is left to the 135M model's pick: it wrote ``role:
"viewer"`` for "give jamal edit access", ``file_type: "image"`` for "the
slide deck", and left ``mode`` out for "cycle from A to B". The choice was
in the message, word for word or as the same stem (``Language.mentions``:
"edit" for "editor"), or, for a code of a count and a period's first letters,
as that count of the period ("the last 6 months" for ``6m``, where the model
wrote the default ``1m``). ``written`` reads it, twice:

- before the generation, the implied copy (``copying.copy_constrained``)
  narrows the list to the values the sources write, when they write some
  and not all (``written_choices``): of two written, the model picks one;
- after it, ``formats.complete`` sets the one value written on the property,
  over the model's pick or where it left the property out (also on the LLM
  judge's calls).

The narrowed property is not made required: the grammar writes a schema's
properties in order, and a required one let the model skip the optional
ones before it ("any open tickets assigned to mfischer?" lost ``assignee``;
over the spent sets 8-11's one-tool asks, ``python -m evals.fill_alone``:
82/190 exact with it, against 85 before any of this). A list none of whose
values is written keeps all of them. A boolean that is off unless asked is
switched on, after the generation, when its name is written (``switched``:
"shuffled", "a draft PR", "reply all"). Numbers and lists of other types are
not read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from services.router.planning.cards import name_words, property_text
from services.runtime.language import Language

#: A word, letters and digits, in any script: what a property's name is matched against as a phrase.
_WORD = re.compile(r"\w+")


def written(prop: Any, sources: Sequence[str], language: Language, tool_name: str = "") -> list[str]:
    """The values of ``prop``'s own string list that ``sources`` write (``Language.mentions``), in the list's
    order; of two or more, a word of the tool's name is dropped ("merge #88 with a rebase": rebase)."""
    values = prop.get("enum") if isinstance(prop, dict) else None
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return []
    found = [v for v in values if any(language.mentions(source, v) for source in sources)]
    verb = set(name_words(tool_name).split())
    return [v for v in found if v.lower() not in verb] if len(found) > 1 else found


def written_choices(schema_json: str, sources: Sequence[str], language: Language, tool_name: str = "") -> str:
    """The schema with each string ``enum`` narrowed to the values ``sources`` write (see the module
    docstring); unchanged when no source writes one."""
    schema = json.loads(schema_json)
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return schema_json
    changed = False
    for name, prop in props.items():
        found = written(prop, sources, language, tool_name)
        if not found or len(found) == len(prop["enum"]):
            continue
        props[name] = {**prop, "enum": found}
        changed = True
    for name, codes in coded(props, sources, language).items():
        props[name] = {**props[name], "enum": codes}
        changed = True
    return json.dumps(schema) if changed else schema_json


def coded(props: dict[str, Any], sources: Sequence[str], language: Language) -> dict[str, list[str]]:
    """Each free string property that takes a currency's code, with the codes of the currencies the sources name
    (in the order first named); none when they name fewer currencies than there are such properties (one
    currency for a 'from' and a 'to' says neither)."""
    takes = [
        name
        for name, prop in props.items()
        if isinstance(prop, dict)
        and prop.get("type") == "string"
        and not {"enum", "const"} & set(prop)
        and language.takes_currency_code(property_text(name, prop))
    ]
    codes = list(dict.fromkeys(code for source in sources for code in language.currency_codes(source)))
    return {name: codes for name in takes} if takes and len(codes) >= len(takes) else {}


def switched(name: str, prop: Any, sources: Sequence[str], language: Language, tool_name: str = "") -> bool:
    """Whether a boolean property that is off unless asked (``default`` not true) is switched on by the
    sources: its name's content words that do not name the tool are all written (``Language.mentions``:
    "shuffled" for ``shuffle``, "unread" for ``unread_only``, "a draft PR" for ``draft``), or, when every
    content word of its name also names the tool, the whole name is written as a phrase ("reply all" for
    ``reply_all`` of ``reply_to_email``). The fill, shown no example, left such switches out.

    A negation is not read ("don't shuffle" switches ``shuffle`` on): the flag stays as the model wrote it
    when it wrote one, since only a property left unset is completed (``formats.complete``)."""
    if not isinstance(prop, dict) or prop.get("type") != "boolean" or prop.get("default") is True:
        return False
    words = name_words(name)
    own = language.content_words(words) - language.content_words(name_words(tool_name))
    if own:
        return any(all(language.mentions(source, word) for word in own) for source in sources)
    phrase = f" {words} "
    return any(phrase in f" {' '.join(_WORD.findall(source.lower()))} " for source in sources)


def apart(codes_of: dict[str, list[str]], arguments: dict[str, Any]) -> dict[str, str]:
    """The code properties (``coded``'s, in schema order) whose value an earlier one holds, each given the first
    named code that no argument holds; empty when none repeats or no named code is left."""
    held = [arguments.get(name) for name in codes_of]
    changed: dict[str, str] = {}
    seen: set[object] = set()
    for name, codes in codes_of.items():
        value = arguments.get(name)
        if value in seen:
            left = [c for c in codes if c not in held and c not in changed.values()]
            if left:
                changed[name] = left[0]
        seen.add(value)
    return changed


__all__ = ["apart", "coded", "switched", "written", "written_choices"]
