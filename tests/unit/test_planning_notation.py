"""notation.py: the shape a property's description or examples give its values, as options and completion."""

from __future__ import annotations

import json

import pytest

from services.router.planning.copying import copy_constrained
from services.router.planning.formats import complete
from services.router.planning.notation import shape

FLIGHT = json.dumps(
    {
        "type": "object",
        "properties": {
            "flight_number": {"type": "string", "description": "Airline code plus number, e.g. 'LH 401'."},
            "note": {"type": "string", "description": "Anything else."},
        },
        "required": ["flight_number"],
    }
)
MEETING = json.dumps(
    {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "start": {"type": "string", "description": "Local start time, 24h HH:MM."},
        },
        "required": ["title"],
    }
)


@pytest.mark.parametrize(
    ("prop", "value", "fits"),
    [
        ({"description": "Airline code plus number, e.g. 'LH 401'."}, "BA287", True),  # the space is optional
        ({"description": "Airline code plus number, e.g. 'LH 401'."}, "picking up", False),
        ({"description": "Issue key like 'OPS-1423'."}, "infra-77", True),  # letters of either case
        ({"description": "Channel like '#general', or '@username' for a DM."}, "#team-alpha", True),
        ({"description": "Channel like '#general', or '@username' for a DM."}, "@sam", True),
        ({"description": "Channel like '#general', or '@username' for a DM."}, "general", False),
        ({"examples": ["v1.2.3"]}, "v10.0.1", True),  # the schema's own examples
        ({"description": "Start, HH:MM."}, "08:30", True),  # a notation stands for its format's shape
    ],
)
def test_a_coded_example_or_a_notation_gives_the_values_shape(prop: dict[str, object], value: str, fits: bool) -> None:
    pattern = shape({"type": "string", **prop})
    assert pattern is not None
    assert bool(pattern.fullmatch(value)) is fits


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "string", "description": "City name, e.g. 'Berlin' or 'Austin, TX'."},  # plain words
        {"type": "string", "description": "Project key, e.g. 'WEB' or 'OPS'."},  # capitals alone: a word's shape
        {"type": "string", "description": "When: a phrase like 'in 20 minutes' or 'tomorrow 9am'."},
        {"type": "string", "description": "Day, YYYY-MM-DD.", "format": "date"},  # a format is formats.py's
        {"type": "string", "description": "Like 'A-1'.", "enum": ["A-1", "B-2"]},  # its own list decides
        {"type": "integer", "description": "e.g. '42'"},
    ],
)
def test_plain_words_a_format_or_a_list_give_no_shape(prop: dict[str, object]) -> None:
    assert shape(prop) is None


def test_the_spans_of_the_shape_are_the_options_when_the_message_holds_one() -> None:
    asked = "is BA 287 still on time? I'm picking someone up"
    narrowed = json.loads(copy_constrained(FLIGHT, asked, implied=True, tool_name="get_flight_status"))
    assert narrowed["properties"]["flight_number"]["enum"] == ["BA 287"]
    # None of that shape written: a preference, not a rule; every span stays an option.
    loose = json.loads(copy_constrained(FLIGHT, "is the Lufthansa flight on time?", implied=True, tool_name="x"))
    assert "Lufthansa" in loose["properties"]["flight_number"]["enum"]


def test_a_property_of_a_shape_left_out_gets_the_one_value_of_that_shape_written() -> None:
    asked = "Put 'Dentist' on my calendar at 08:30"
    assert complete(MEETING, {"title": "Dentist"}, asked)["start"] == "08:30"
    assert "start" not in complete(MEETING, {"title": "x"}, "Dentist at 08:30 or 09:15")  # two: none picked
    assert complete(MEETING, {"title": "x", "start": "09:00"}, asked)["start"] == "09:00"  # the fill's stands


CI = json.dumps(
    {
        "type": "object",
        "properties": {
            "repo": {"type": "string", "description": "Repository as owner/name."},
            "ref": {"type": "string", "description": "Branch name or commit SHA."},
        },
        "required": ["repo"],
    }
)


def test_a_slash_template_is_a_shape_and_its_one_value_is_no_other_propertys() -> None:
    assert shape({"type": "string", "description": "Repository as owner/name."}) is not None
    assert shape({"type": "string", "description": "Tags and/or labels."}) is None  # no template: function words
    asked = "did the pipeline go green on release-2.4 for acme/mobile-app?"
    props = json.loads(copy_constrained(CI, asked, implied=True, tool_name="get_ci_status"))["properties"]
    assert props["repo"]["enum"] == ["acme/mobile-app"]
    assert "release-2.4" in props["ref"]["enum"] and "acme/mobile-app" not in props["ref"]["enum"]
    # Two of the shape: either may be the other property's ("release/3.2 in acme/payments").
    two = json.loads(copy_constrained(CI, "did CI pass on release/3.2 in acme/payments?", implied=True))
    assert {"release/3.2", "acme/payments"} <= set(two["properties"]["ref"]["enum"])


def test_a_property_named_an_identifier_takes_one_code_word() -> None:
    order = {"type": "string", "description": "Order number."}
    assert shape(order) is None  # a description in plain words says no shape
    pattern = shape(order, "order_id")
    assert pattern is not None
    assert all(pattern.fullmatch(v) for v in ("W55120", "A77-210394", "INFRA-88", "#88"))
    assert not any(pattern.fullmatch(v) for v in ("W55120 showed", "Bump INFRA-88", "blender", "-", "finance's"))
    returns = json.dumps(
        {
            "type": "object",
            "properties": {
                "order_id": order,
                "reason": {"type": "string", "description": "Why it goes back."},
            },
            "required": ["order_id", "reason"],
        }
    )
    message = "The blender from order W55120 showed up cracked."
    props = json.loads(copy_constrained(returns, message, implied=True))["properties"]
    assert props["order_id"]["enum"] == ["W55120"]
    assert "W55120" not in props["reason"]["enum"]  # the one identifier written is the order's
