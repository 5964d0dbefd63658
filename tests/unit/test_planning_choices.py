"""choices.written_choices and Language.mentions: a value of a property's own list that the user wrote."""

from __future__ import annotations

import json

import pytest

from services.router.planning.choices import written_choices
from services.router.planning.copying import copy_constrained
from services.router.planning.formats import complete
from services.router.planning.grounding import ground
from services.runtime.language import ENGLISH

DEALS = json.dumps(
    {
        "type": "object",
        "properties": {
            "stage": {"type": "string", "enum": ["lead", "proposal", "negotiation", "won", "lost"]},
            "owner": {"type": "string"},
            "sort": {"type": "string", "enum": ["amount", "close_date"], "default": "amount"},
        },
    }
)


@pytest.mark.parametrize(
    ("text", "value", "written"),
    [
        ("deals in negotiation", "negotiation", True),
        ("move it to in progress", "in_progress", True),  # the value's words, its underscore a space
        ("let sam edit the sheet", "editor", True),  # one stem
        ("how long to cycle there", "cycling", True),
        ("the slide deck", "slides", True),
        ("every day at 8am", "daily", False),  # a synonym is not the word
        ("the French version", "fr", False),  # a word of under three letters says too little
        ("over the last year", "1y", True),  # a count and a period's first letter: one year
        ("tell us", "us", False),  # a function word is no content
        ("cheapest first", "price_asc", False),  # every word of the value must be written
    ],
)
def test_a_value_is_written_as_is_or_as_its_stem(text: str, value: str, written: bool) -> None:
    assert ENGLISH.mentions(text, value) is written


def test_a_list_is_narrowed_to_the_values_written_and_not_made_required() -> None:
    narrowed = json.loads(written_choices(DEALS, ["which of Farah's deals are in negotiation?"], ENGLISH))
    assert narrowed["properties"]["stage"]["enum"] == ["negotiation"]
    # Required, it let the grammar skip the optional properties before it; the completion sets it instead.
    assert "required" not in narrowed
    assert narrowed["properties"]["sort"]["enum"] == ["amount", "close_date"]  # none written: all kept
    two = json.loads(written_choices(DEALS, ["won or lost deals"], ENGLISH))
    assert two["properties"]["stage"]["enum"] == ["won", "lost"]


def test_nothing_written_leaves_the_schema_as_it_was() -> None:
    assert written_choices(DEALS, ["show me my deals"], ENGLISH) == DEALS


def test_the_implied_copy_narrows_a_tools_own_list_and_the_completion_sets_the_one_written() -> None:
    schema = json.dumps(
        {
            "type": "object",
            "properties": {
                "repo": {"type": "string"},
                "state": {"type": "string", "enum": ["open", "closed", "merged"]},
            },
        }
    )
    narrowed = json.loads(copy_constrained(schema, "any open PRs in acme/web?", implied=True, tool_name="list_prs"))
    assert narrowed["properties"]["state"]["enum"] == ["open"]
    # The model left it out, or picked another: the one value written is set after the generation.
    assert complete(schema, {"repo": "acme/web"}, "any open PRs in acme/web?", "list_prs")["state"] == "open"
    assert complete(schema, {"state": "closed"}, "PRs someone merged", "list_prs")["state"] == "merged"  # a stem
    # A tool with examples (not implied) keeps its own list before the generation.
    assert json.loads(copy_constrained(schema, "any open PRs?"))["properties"]["state"]["enum"] == [
        "open",
        "closed",
        "merged",
    ]


def test_a_coded_value_is_read_only_as_written() -> None:
    assert ENGLISH.mentions("page the database team, sev1: replica lag", "sev1")
    assert not ENGLISH.mentions("page the database team, sev1: replica lag", "sev2")  # not by its letters


@pytest.mark.parametrize(
    ("name", "tool", "text", "on"),
    [
        ("shuffle", "play_music", "play some Khruangbin, shuffled", True),  # a stem
        ("unread_only", "search_email", "just check my unread stuff", True),
        ("draft", "create_pull_request", "open a draft PR from fix/x into main", True),
        ("draft", "create_pull_request", "open a PR from fix/x into main", False),
        ("reply_all", "reply_to_email", "reply all on the 'Offsite' thread", True),  # the name as a phrase
        ("reply_all", "reply_to_email", "reply on the 'Offsite' thread", False),  # its one word names the tool
    ],
)
def test_a_switch_whose_name_is_written_is_turned_on(name: str, tool: str, text: str, on: bool) -> None:
    schema = json.dumps({"type": "object", "properties": {name: {"type": "boolean", "default": False}}})
    assert complete(schema, {}, text, tool).get(name, False) is on
    assert complete(schema, {name: False}, text, tool)[name] is False  # what the fill wrote stands
    on_by_default = json.dumps({"type": "object", "properties": {name: {"type": "boolean", "default": True}}})
    assert name not in complete(on_by_default, {}, text, tool)


_RATE = json.dumps(
    {
        "type": "object",
        "properties": {
            "base": {"type": "string", "description": "Currency to convert from, ISO 4217 code such as EUR."},
            "target": {"type": "string", "description": "Currency to convert to, ISO 4217 code."},
            "amount": {"type": "number", "description": "Amount in the base currency."},
        },
        "required": ["base", "target"],
    }
)
_EXPENSE = json.dumps(
    {
        "type": "object",
        "properties": {
            "amount": {"type": "number"},
            "currency": {"type": "string", "description": "ISO currency code; defaults to the home currency."},
            "note": {"type": "string", "description": "What it was for."},
        },
        "required": ["amount"],
    }
)


@pytest.mark.parametrize(
    ("text", "codes"),
    [
        ("how many yen would I get for 500 euros?", ["JPY", "EUR"]),
        ("convert 100 bucks to Swiss francs", ["USD", "CHF"]),
        ("£40 in $", ["GBP", "USD"]),
        ("what's the usd to CHF rate", ["USD", "CHF"]),
        ("try 10 TRY in EUR", ["TRY", "EUR"]),
        ("Try it again", []),
        ("the words say nothing of money", []),
    ],
)
def test_currencies_are_read_as_their_codes(text: str, codes: list[str]) -> None:
    assert ENGLISH.currency_codes(text) == codes


@pytest.mark.parametrize(
    ("text", "takes"),
    [
        ("base Currency to convert from, ISO 4217 code such as EUR.", True),
        ("currency ISO currency code; defaults to the home currency.", True),
        ("currency code Three-letter code.", True),
        ("promo code A promo code, applied in the user's currency.", False),
        ("currency Currency.", False),
    ],
)
def test_a_property_takes_a_currency_code_when_it_says_so(text: str, takes: bool) -> None:
    assert ENGLISH.takes_currency_code(text) is takes


def test_a_property_that_takes_a_currency_code_is_offered_the_codes_named() -> None:
    props = json.loads(written_choices(_RATE, ["how many yen would I get for 500 euros?"], ENGLISH))["properties"]
    assert props["base"]["enum"] == props["target"]["enum"] == ["JPY", "EUR"]
    assert "enum" not in props["amount"]
    # One currency named for a 'from' and a 'to': neither is said, so neither is narrowed.
    assert json.loads(written_choices(_RATE, ["what's the euro doing today?"], ENGLISH)) == json.loads(_RATE)
    assert "enum" not in json.loads(written_choices(_EXPENSE, ["log 18 for lunch"], ENGLISH))["properties"]["currency"]


def test_the_completion_sets_the_one_currency_and_keeps_two_properties_apart() -> None:
    assert complete(_EXPENSE, {"amount": 42.5}, "Log 42.50 euros for the taxi")["currency"] == "EUR"
    filled = complete(_RATE, {"base": "EUR", "target": "EUR", "amount": 500}, "how many yen for 500 euros?")
    assert (filled["base"], filled["target"]) == ("EUR", "JPY")
    # Two different codes are the model's pick and stay as written.
    filled = complete(_RATE, {"base": "CAD", "target": "GBP"}, "250 GBP in CAD")
    assert (filled["base"], filled["target"]) == ("CAD", "GBP")


def test_a_code_is_grounded_by_the_currency_named() -> None:
    assert ground({"base": "EUR", "target": "JPY"}, _RATE, "how many yen for 500 euros?").arguments is not None
    assert ground({"base": "EUR", "target": "GBP"}, _RATE, "how many yen for 500 euros?").arguments is None
