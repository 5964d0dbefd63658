"""evals.fill_offers (whether the fill's narrowed schema offers each expected argument) and evals.fill_alone."""

from __future__ import annotations

import json

from evals.cases import Case, TurnSpec
from evals.fill_alone import one_tool_asks
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
        _case("euros in francs, imperial", {"target": "CHF", "amount": 10, "units": "imperial"}),  # CHF said nowhere
    ]
    counts = offers(cases, {"rate": RATE})
    assert counts == {
        ("free-form string", OFFERED): 1,
        ("number", OFFERED): 1,
        ("own list (enum)", FREE): 1,  # no value of the list written: the model picks
        ("free-form string", NOT_OFFERED): 1,
        ("number", FREE): 1,
        ("own list (enum)", OFFERED): 1,  # narrowed to the value written
    }
    assert "| all | 6 | 3 | 1 | 2 |" in offers_table(counts)


def test_a_list_of_a_format_is_offered_the_values_written() -> None:
    invite = json.dumps(
        {"type": "object", "properties": {"who": {"type": "array", "items": {"type": "string", "format": "email"}}}}
    )
    case = Case("c", "single", "dev", (TurnSpec("invite a@x.io", frozenset({"rate"}), {"rate": {"who": ["a@x.io"]}}),))
    assert offers([case], {"rate": invite}) == {("array", OFFERED): 1}


def test_a_tool_with_examples_is_not_read() -> None:
    assert not offers([_case("2,500 euros", {"amount": 2500})], {})


def test_the_fill_alone_reads_the_first_turn_of_single_cases_that_expect_one_described_tool() -> None:
    two = Case("t", "multi_tool", "dev", (TurnSpec("a and b", frozenset({"rate", "clock"}), {"rate": {"x": 1}}),))
    builtin = Case("b", "single", "dev", (TurnSpec("time in Lima", frozenset({"clock"}), {"clock": {"z": 1}}),))
    cases = [_case("2,500 euros in francs", {"amount": 2500}), two, builtin, _case("rates?", {})]
    assert one_tool_asks(cases, {"rate"}) == [("2,500 euros in francs", "rate", {"amount": 2500})]
