"""Whether the fill's grammar offers the expected value: ``python -m evals.stages --fill``, no engine.

A tool described only is filled under its schema narrowed to what the user
wrote (``copying.implied_copy``): a free-form string becomes an enum of the
message's spans, a number an enum of its amounts. Argument exactness then
has two factors, and they need different fixes: whether the right value is
among the options at all (the narrowing's reach), and whether the 135M model
picks it (the generation's). This reads the first: for every argument a
first turn expects of a catalog tool, whether the narrowed schema offers it,
per kind of property. The served eval's argument exactness over the same
turns, divided by this, is the generation's share. A property's own list
(``enum``) is narrowed only to the values the message writes
(``choices.py``): "offered" there means narrowed and still right, "not
among the options" that the narrowing lost the value, "left free" that no
value was written. Counts only, so it may run on a held-out split.

Each turn's message is taken whole, as for a one-tool turn; a turn that asks
for two tools is filled from its own clause when served, so its options may
be fewer there.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from evals.arguments import check_generic
from evals.cases import Case
from services.router.planning.copying import copy_constrained

#: How a property's expected value stands in the narrowed schema.
OFFERED, NOT_OFFERED, FREE = "offered", "not among the options", "left free (no option fits, or none written)"


def kind_of(prop: Mapping[str, Any]) -> str:
    """The kind of a property as the narrowing treats it."""
    if "const" in prop or prop.get("type") == "boolean":
        return "boolean or constant"
    if "enum" in prop:
        return "own list (enum)"
    if prop.get("type") in {"integer", "number"}:
        return "number"
    if prop.get("type") == "array":
        return "array"
    return "string with a format" if "format" in prop else "free-form string"


def standing(want: Any, narrowed: Mapping[str, Any], name: str, own: Mapping[str, Any]) -> str:
    """Whether the narrowed property ``name`` offers the expected value ``want`` (``own``: its schema before)."""
    items = narrowed.get("items")
    if isinstance(items, dict) and isinstance(items.get("enum"), list):  # a list of a format: the values written
        return OFFERED if check_generic({name: want}, {name: items["enum"]}) is None else NOT_OFFERED
    options = narrowed.get("enum")
    if not isinstance(options, list) or options == own.get("enum"):
        return FREE
    return OFFERED if any(check_generic({name: want}, {name: o}) is None for o in options) else NOT_OFFERED


def offers(cases: Sequence[Case], schemas: Mapping[str, str]) -> Counter[tuple[str, str]]:
    """(kind of property, standing) counts over the first turns' expected arguments of the tools in ``schemas``
    (a tool described only: name → its JSON schema)."""
    counts: Counter[tuple[str, str]] = Counter()
    for case in cases:
        turn = case.turns[0]
        for tool, expected in turn.args.items():
            if tool not in schemas:
                continue
            schema = json.loads(schemas[tool])
            narrowed = json.loads(copy_constrained(schemas[tool], turn.message, implied=True, tool_name=tool))
            for name, want in expected.items():
                prop = schema.get("properties", {}).get(name, {})
                kind = kind_of(prop)
                if kind == "boolean or constant":
                    continue  # nothing to narrow
                counts[kind, standing(want, narrowed["properties"].get(name, {}), name, prop)] += 1
    return counts


def offers_table(counts: Counter[tuple[str, str]]) -> str:
    """A markdown table: per kind of property, how many expected values the grammar offers."""
    lines = [
        f"| kind of property | expected | {OFFERED} | {NOT_OFFERED} | {FREE} |",
        "|---|---|---|---|---|",
    ]
    kinds = sorted({kind for kind, _ in counts})
    for kind in [*kinds, "all"]:
        row = [
            sum(n for (k, s), n in counts.items() if s == standing and kind in {k, "all"})
            for standing in (OFFERED, NOT_OFFERED, FREE)
        ]
        lines.append(f"| {kind} | {sum(row)} | " + " | ".join(str(n) for n in row) + " |")
    return "\n".join(lines)


__all__ = ["offers", "offers_table"]
