"""evals.fill_offers: whether the fill's narrowed schema offers each expected argument, per kind of property."""

from __future__ import annotations

import json

from evals.cases import Case, TurnSpec
from evals.fill_offers import FREE, NOT_OFFERED, OFFERED, offers, offers_table

RATE = json.dumps(
    {
        "type": "object",
        "properties": {
            "base": {"type": "string"},
            "target": {"type": "string"},
            "amount": {"type": "number"},
            "units": {"type": "string", "enum": ["metric", "imperial"]},
        },
        "required": ["base", "target"],
    }
)


def _case(message: str, args: dict[str, object]) -> Case:
    turn = TurnSpec(message, frozenset({"rate"}), {"rate": args})
    return Case("c", "single", "dev", (turn,))


def test_each_expected_argument_is_offered_not_offered_or_left_free() -> None:
    cases = [
        _case("2,500 euros in francs", {"base": {"contains": "euros"}, "amount": 2500, "units": "metric"}),
        _case("euros in francs", {"target": "CHF", "amount": 10}),  # CHF is said nowhere; no amount at all
    ]
    counts = offers(cases, {"rate": RATE})
    assert counts == {
        ("free-form string", OFFERED): 1,
        ("number", OFFERED): 1,
        ("free-form string", NOT_OFFERED): 1,
        ("number", FREE): 1,
    }  # the schema's own enum is not the narrowing's and is not counted
    assert "| all | 4 | 2 | 1 | 1 |" in offers_table(counts)


def test_a_tool_with_examples_is_not_read() -> None:
    assert not offers([_case("2,500 euros", {"amount": 2500})], {})
