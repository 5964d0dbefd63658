"""Choices: a value from a property's own list that the user wrote is that property's value.

A tool described only shows the fill no example call, and with an ``enum`` of
its own a property is left to the 135M model's pick: over the spent blind
sets' one-tool asks it wrote ``stage: "proposal"`` for "deals in
negotiation", ``status: "in_progress"`` for "still open", ``method:
"merge"`` for "squash-merge", ``mode: "transit"`` for "walking route" — the
choice was in the message, word for word or as the same stem
(``Language.mentions``: "edit" for "editor"). So, for the implied copy
(``copying.copy_constrained``), a list property is narrowed to the values
the sources write, when they write any; when they write exactly one, the
property is required too, so that the grammar writes it (the model left an
optional one out: "cycle from A to B" and no ``mode``). A list none of whose
values is written keeps all of them: the model still picks, or leaves it
out. Booleans, numbers and lists of other types are not read. The same
reading (``written``) completes a call written by the model elsewhere (the
LLM judge's, ``formats.complete``): one value written overrides its pick.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from services.router.planning.cards import name_words
from services.runtime.language import Language


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
        if len(found) == 1 and name not in schema.setdefault("required", []):
            schema["required"].append(name)
        changed = True
    return json.dumps(schema) if changed else schema_json


__all__ = ["written", "written_choices"]
