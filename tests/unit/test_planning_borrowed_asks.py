"""Asks for tools that are not loaded must not be taken by the tools that are, nor filled with invented values.

The generality eval's "catalog not loaded" run: a hotel booking, an order number or a logged expense reaches a
mesh with only the built-ins, whose arithmetic tool is near any message with a number in it.
"""

from __future__ import annotations

import json
import re

from services.router.planning.copying import applies, evident, pinned
from services.router.planning.grounding import declared_constants, ground, number_pattern
from services.router.planning.judges import Decision
from services.router.planning.settings import SelectorSettings
from services.tools.builtin import calculator, clock
from tests.support.planning import BagOfWords, Selector
from tests.unit.test_tool_selection import NO_TOOL, SPECS

CALCULATOR = json.dumps(calculator.TOOL.parameters)


def test_numbers_joined_by_bare_hyphens_are_no_evidence_of_arithmetic() -> None:
    # An order number, a date and a page range have the shape of a subtraction; they prove no ask for one.
    for message in ("I want to return order 88-2201, the jacket is the wrong size", "book it for 2026-08-01"):
        assert not evident(CALCULATOR, message), message
        assert not pinned(CALCULATOR, message), message
    for message in ("what's 100 - 37", "what is 23*47", "what's twelve times eleven", "15% of 80"):
        assert evident(CALCULATOR, message), message


def test_an_identity_grounds_a_json_number_but_not_a_number_written_into_an_expression() -> None:
    lunch = "Log an 18 dollar lunch with a client under meals"
    assert ground({"expression": "18+1"}, CALCULATOR, lunch).arguments is None
    grounded = number_pattern(lunch) or "(?!)"
    assert not re.fullmatch(grounded, "1")  # the fill's grammar offers no unsaid 1 either
    assert re.fullmatch(grounded, "18")
    paged = json.dumps({"type": "object", "properties": {"q": {"type": "string"}, "page": {"type": "integer"}}})
    assert ground({"q": "lunch", "page": 1}, paged, lunch).arguments == {"q": "lunch", "page": 1}
    assert ground({"expression": "1-0.15"}, CALCULATOR, "one minus 15%").arguments is not None  # said, in words


def test_no_calculator_constant_is_allowed_in_every_message() -> None:
    assert 2 not in declared_constants(CALCULATOR, "show deals in negotiation worth at least 50000")
    assert 100 not in declared_constants(CALCULATOR, "show deals in negotiation worth at least 50000")
    assert ground({"expression": "50000-100"}, CALCULATOR, "show deals worth at least 50000").arguments is None
    assert 2 in declared_constants(CALCULATOR, "what is the average of 3 and 5")
    assert ground({"expression": "(3+5)/2"}, CALCULATOR, "what is the average of 3 and 5").arguments is not None
    assert ground({"expression": "45/60*100"}, CALCULATOR, "what percentage of 60 is 45").arguments is not None


async def test_a_clause_does_not_choose_a_tool_when_the_whole_message_needs_none() -> None:
    settings = SelectorSettings(choose=0.5, reject=0.2, margin=0.05)
    s = Selector(BagOfWords(), settings, no_tool_examples=NO_TOOL)
    await s.load(SPECS)
    # The clause "stock price quote" alone is the stocks tool's ask ...
    alone = await s.select("stock price quote")
    assert alone.decision is Decision.TOOLS and alone.tools == ("stocks",)
    # ... but cut from a message that as a whole is a no-tool request, it is left to the band.
    message = "write a poem about the sea and hello there how are you, stock price quote"
    whole = await s.select(message)
    assert whole.decision is not Decision.TOOLS


def test_a_number_used_more_than_once_beyond_what_the_message_writes_is_invented() -> None:
    lunch = "Log an 18 dollar lunch with a client under meals"
    assert ground({"expression": "18+18+18"}, CALCULATOR, lunch).arguments is None
    assert ground({"expression": "80+80*0.15"}, CALCULATOR, "a 15% tip on 80").arguments is not None  # twice: fine
    assert ground({"expression": "5*5*5"}, CALCULATOR, "5 times 5 times 5").arguments is not None  # written thrice
    assert ground({"expression": "2*24*60*60"}, CALCULATOR, "seconds in 2 days").arguments is not None  # constants


def test_a_value_equal_to_the_schemas_default_is_never_invented() -> None:
    schema = json.dumps(clock.make_tool().parameters)
    # "What's the date today?" names no place: the clock's own default zone is the schema's value, not the model's.
    assert ground({"timezone": "UTC"}, schema, "What's the date today?").arguments == {"timezone": "UTC"}
    assert ground({"timezone": "Europe/Oslo"}, schema, "What's the date today?").arguments is None


def test_an_amount_restated_alone_is_no_composition() -> None:
    # One amount, no other number: composed from it alone, the expression computes nothing the user asked.
    francs = "how many swiss francs would i get for 500 euros?"
    assert ground({"expression": "500-500"}, CALCULATOR, francs).arguments is None
    assert ground({"expression": "2500-2,500"}, CALCULATOR, "2,500 Swiss francs in euros").arguments is None
    assert ground({"expression": "500*1.1"}, CALCULATOR, "500 euros at 1.1").arguments is not None
    assert ground({"expression": "5*5*5"}, CALCULATOR, "5 times 5 times 5").arguments is not None  # as written


def test_a_composed_expression_is_an_operation_on_stated_amounts() -> None:
    prop = calculator.TOOL.parameters["properties"]["expression"]
    compose = prop["x-agentmesh-compose-pattern"]

    def fits(message: str, expression: str) -> bool:
        grounded = number_pattern(message, constants=sorted(declared_constants(CALCULATOR, message)))
        return grounded is not None and re.fullmatch(compose.replace("{number}", grounded), expression) is not None

    deals = "which deals in negotiation are worth 50,000 or more?"
    assert not fits(deals, "50,000") and not fits(deals, "$")  # an amount or a sign alone computes nothing
    assert fits("split 84 between 4", "84/4") and fits("the square root of 1081", "sqrt(1081)")
    assert not fits("sqrt 1081", "round(round(1081))")  # a function takes amounts, not another name
    # A date, a time or an id states no amount: its digits are not there to compute with.
    lunch = "Add 38.50 USD for a client lunch to my expense report, dated 2026-12-04."
    assert not fits(lunch, "38.50+2026-12-04") and not fits(lunch, "38.50+2026")
    assert number_pattern("put it on my calendar for 2027-01-19 at 08:30, ticket INC-2041") is None
    # A constant scales an amount the conversation states or a unit it counts, never stands alone.
    assert number_pattern("How much have I put down for meals so far this month?", constants=[12, 30]) is None
    assert fits("How long is a week in hours?", "7*24")


def test_a_tool_composed_from_numbers_does_not_apply_to_a_message_that_states_none() -> None:
    assert not applies(CALCULATOR, "look through my notes and add 'buy rye flour' to my groceries list")
    assert not applies(CALCULATOR, "what have I expensed for meals since 2026-11-01?")
    assert applies(CALCULATOR, "split an 84 dollar bill between 4 people")
    assert applies(CALCULATOR, "now multiply that by 3", "What is 23*47?", "23*47 = 1081.")
