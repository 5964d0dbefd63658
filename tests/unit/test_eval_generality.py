"""The generality eval's parts: the catalog and its cases, generic arguments, the run without the catalog."""

from __future__ import annotations

import json
from typing import Any

import pytest

from evals.arguments import check_arguments
from evals.cases import CaseError, load_cases, parse_case
from evals.catalog import GENERALITY_DIR, catalog_tools, load_catalog
from evals.generality import BUILTINS, invented_tokens, without_catalog
from evals.stages import row_of, selector_with
from services.router.planning.judges import Decision, Verdict


def test_the_catalog_is_description_only_and_its_cases_load_in_both_splits() -> None:
    catalog = load_catalog()
    assert len(catalog) >= 40
    for tool in catalog_tools(catalog):
        assert tool.examples == () and tool.negative_examples == ()
        assert "x-agentmesh" not in json.dumps(tool.parameters)
    cases = load_cases(["dev", "heldout"], GENERALITY_DIR, catalog)
    assert sum(len(c.turns) for c in cases) >= 150
    assert {c.split for c in cases} == {"dev", "heldout"}
    named = {t for c in cases for turn in c.turns for t in turn.tools}
    assert named <= set(catalog) | BUILTINS


def test_a_catalog_case_names_only_declared_parameters() -> None:
    catalog: dict[str, Any] = {
        "send_email": {"parameters": {"properties": {"to": {}, "subject": {}, "cc": {"type": "array"}}}}
    }

    def case(args: dict[str, Any]) -> dict[str, Any]:
        turn = {"message": "m", "tools": ["send_email"], "args": {"send_email": args}}
        return {"id": "x-1", "category": "single", "turns": [turn]}

    parsed = parse_case(case({"to": "a@b.c", "subject": {"contains": "lunch"}}), "dev", "here", catalog)
    assert parsed.turns[0].args["send_email"]["to"] == "a@b.c"
    assert parse_case(case({"cc": ["a@b.c"]}), "dev", "here", catalog).turns[0].args["send_email"]["cc"] == ["a@b.c"]
    with pytest.raises(CaseError, match="malformed"):  # a list only for a parameter its schema makes an array
        parse_case(case({"to": ["a@b.c"]}), "dev", "here", catalog)
    with pytest.raises(CaseError, match="some of its parameters"):
        parse_case(case({"bcc": "x"}), "dev", "here", catalog)


@pytest.mark.parametrize(
    ("expected", "arguments", "right"),
    [
        ({"city": "Lisbon"}, {"city": " lisbon "}, True),
        ({"city": {"any_of": ["NYC", "New York"]}}, {"city": "new york"}, True),
        ({"days": 3}, {"days": 3.0}, True),
        ({"days": 3}, {"days": 4}, False),
        ({"unread_only": True}, {"unread_only": False}, False),
        ({"query": {"contains": "deposit"}}, {"query": "landlord Deposit email"}, True),
        ({"query": {"contains": "deposit"}}, {}, False),
        ({"tags": ["Travel", "work"]}, {"tags": ["work", "travel"]}, True),
        ({"tags": ["travel"]}, {"tags": ["travel", "work"]}, False),
        ({"tags": ["travel"]}, {"tags": "travel"}, False),
    ],
)
def test_catalog_arguments_are_compared_by_value(
    expected: dict[str, object], arguments: dict[str, object], right: bool
) -> None:
    assert (check_arguments("weather_forecast", expected, arguments) is None) is right


def test_without_the_catalog_its_tools_are_no_tool_and_invented_values_are_found() -> None:
    catalog = load_catalog()
    cases = load_cases(["dev"], GENERALITY_DIR, catalog)
    bare = without_catalog(cases)
    assert all(turn.tools <= BUILTINS for c in bare for turn in c.turns)
    assert any(turn.tools for c in bare for turn in c.turns)  # the built-in asks keep their tools
    assert invented_tokens('{"expression": "1000*1000"}', "How much is NVDA trading at?") == ["1000", "1000"]
    assert invented_tokens('{"timezone": "US"}', "Email alice and ask if she is free") == ["US"]
    assert invented_tokens('{"expression": "1,500*2"}', "what is 1,500 times 2") == []


def test_the_stage_table_puts_each_verdict_in_one_row() -> None:
    a, b = frozenset({"a"}), frozenset({"b"})
    assert row_of(Verdict(Decision.TOOLS, tools=("a",)), a) == 0
    assert row_of(Verdict(Decision.NONE), frozenset()) == 0
    assert row_of(Verdict(Decision.TOOLS, tools=("a",)), b) == 1  # the wrong tool, decided
    assert row_of(Verdict(Decision.NONE), a) == 1  # a missed tool
    assert row_of(Verdict(Decision.AMBIGUOUS, candidates=("b", "a")), a) == 2
    # A decided clause with another left open is the LLM judge's: its candidates count.
    assert row_of(Verdict(Decision.TOOLS, tools=("a",), undecided=(("and b", ("b",)),)), a | b) == 2
    assert row_of(Verdict(Decision.AMBIGUOUS, candidates=("b",)), a) == 3
    assert row_of(Verdict(Decision.AMBIGUOUS, candidates=("b",)), frozenset()) == 4
    assert selector_with(["described_choose=0.5"]).described_choose == 0.5
    with pytest.raises(SystemExit, match="FIELD=NUMBER"):
        selector_with(["no_such_field=1"])
