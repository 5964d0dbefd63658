"""Asks for tools that are not loaded must not be taken by the tools that are, nor filled with invented values.

The generality eval's "catalog not loaded" run: a hotel booking, an order number or a logged expense reaches a
mesh with only the built-ins, whose arithmetic tool is near any message with a number in it.
"""

from __future__ import annotations

import json
import re

from services.router.planning.copying import evident, pinned
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
    assert not re.fullmatch(number_pattern(lunch), "1")  # the fill's grammar offers no unsaid 1 either
    assert re.fullmatch(number_pattern(lunch), "18")
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
