"""A described tool's schema read closer: string formats as value shapes, and the word score of its card."""

from __future__ import annotations

import json

import pytest

from agentmesh.common.v1 import common_pb2
from services.router.planning.cards import tool_cards
from services.router.planning.copying import copy_constrained
from services.router.planning.formats import complete, shaped, values_in
from services.router.planning.grounding import ground
from services.router.planning.labels import heading
from services.router.planning.lexical import WordWeights
from services.router.planning.spans import quotations
from services.runtime.language import ENGLISH
from services.runtime.time_units import SECONDS, in_unit
from services.tools.builtin import math_words, units

SHARE = json.dumps(
    {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path."},
            "email": {"type": "string", "format": "email", "description": "Who to share with."},
            "until": {"type": "string", "format": "date"},
            "role": {"type": "string", "enum": ["viewer", "editor"]},
        },
        "required": ["path", "email"],
    }
)


def test_a_format_offers_only_the_spans_of_its_shape() -> None:
    message = "give sam@partner.co edit access to /legal/NDA-draft.docx until 2026-03-01"
    props = json.loads(copy_constrained(SHARE, message, implied=True))["properties"]
    assert props["email"]["enum"] == ["sam@partner.co"]  # not a composed "email@partner.co"
    assert props["until"]["enum"] == ["2026-03-01"]
    assert "/legal/NDA-draft.docx" in props["path"]["enum"]
    assert props["role"] == {"type": "string", "enum": ["editor"]}  # its own list, to the value written ("edit")
    # No value of the shape in the message: the format keeps its own rule.
    assert (
        json.loads(copy_constrained(SHARE, "share the deck with the team", implied=True))["properties"]["email"][
            "format"
        ]
        == "email"
    )
    assert shaped("hostname", ["example.com"]) == []  # a format whose values have no written shape here


def test_a_value_of_a_format_the_fill_left_out_reaches_its_one_property() -> None:
    text = "share /q3.pdf with lee@corp.com until 2026-03-01."
    assert values_in("date", text) == ["2026-03-01"] and values_in("email", text) == ["lee@corp.com"]
    assert complete(SHARE, {"path": "/q3.pdf", "email": "lee@corp.com"}, text) == {
        "path": "/q3.pdf",
        "email": "lee@corp.com",
        "until": "2026-03-01",
    }
    # Two dates and one property: which is meant is not guessed.
    assert "until" not in complete(SHARE, {"path": "/q3.pdf"}, "from 2026-03-01 to 2026-03-09")
    # A value an argument already took is not set twice.
    assert complete(SHARE, {"path": "2026-03-01"}, "2026-03-01") == {"path": "2026-03-01"}


def spec(name: str, description: str) -> common_pb2.ToolSpec:
    return common_pb2.ToolSpec(name=name, description=description, parameters_json_schema='{"type":"object"}')


def test_words_only_one_tool_card_uses_weigh_more_than_words_every_card_uses() -> None:
    cards = tool_cards(
        [
            spec("search_chat_history", "Search the team chat history for messages."),
            spec("search_email", "Search the mailbox for messages."),
            spec("search_files", "Search the drive for files."),
        ]
    )
    weights = WordWeights.of(cards, ENGLISH)
    chat, mail, files = weights.scores(ENGLISH.content_words("search the chat for what Lena said about 3 logos"))
    assert chat > mail == files > 0  # "search" is every tool's; "chat" is one tool's
    assert weights.weight["chat"] > weights.weight["message"] > weights.weight["search"]
    assert "<num>" not in weights.weight  # numbers are values, not intent


@pytest.mark.parametrize(
    ("text", "action"),
    [
        ("Find open tickets mentioning 'timeout'", "read"),
        ("can you please look up my orders", "read"),
        ("I'd like to book a table for two", "create"),
        ("go ahead and cancel my 3pm", "delete"),
        ("bump it to urgent", "update"),
        ("email Sam the deck", "send"),
        ("merge #88 with a rebase", "=merge"),  # a verb whose kind is not plain stands for itself
        ("what's on my schedule tomorrow?", "read"),  # a question reads: "schedule" is no verb here
        ("what reminders do I have set?", "read"),  # its later "set" sets none
        ("Are there open tickets about SSO?", "read"),
        ("the usual, thanks", None),  # no verb up front
        ("open the onboarding doc", "=open"),  # its kind depends on its object
        ("", None),
    ],
)
def test_a_requests_action_is_its_opening_verbs_kind(text: str, action: str | None) -> None:
    assert ENGLISH.action(text) == action


def test_a_tool_whose_name_does_another_plain_kind_loses_and_one_that_names_the_verb_gains() -> None:
    cards = tool_cards(
        [
            spec("create_ticket", "A ticket in the tracker."),
            spec("search_tickets", "Tickets in the tracker, by text."),
            spec("merge_pull_request", "Merges a pull request."),
            spec("weather_forecast", "The forecast for a city."),
        ]
    )
    weights = WordWeights.of(cards, ENGLISH)
    assert weights.actions == ("create", "read", "=merge", "=weather")
    assert weights.agreement(ENGLISH.action("find open tickets")).tolist() == [-1, 0, 0, 0]  # a shared kind: 0
    assert weights.agreement(ENGLISH.action("merge #88")).tolist() == [0, 0, 1, 0]
    assert weights.agreement(None).tolist() == [0, 0, 0, 0]


TODO = json.dumps(
    {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "list": {"type": "string"},
            "due": {"type": "string", "format": "date"},
            "status": {"type": "string", "enum": ["open", "in_progress", "done"]},
        },
        "required": ["title"],
    }
)


def test_the_schemas_own_words_are_no_value_while_another_span_is_left() -> None:
    props = json.loads(
        copy_constrained(TODO, "add 'call plumber' to my list on 2026-03-01", implied=True, tool_name="add_todo")
    )["properties"]
    assert "add" not in props["title"]["enum"] and "call plumber" in props["title"]["enum"]  # the tool's verb
    assert not any(o.startswith("list") for o in props["list"]["enum"])  # led by its own property's name
    assert "my list" not in props["title"]["enum"]  # ends with a property's name
    assert "2026-03-01" not in props["title"]["enum"] and props["due"]["enum"] == ["2026-03-01"]  # the date's
    # Nothing else left: the schema's own word stays an option rather than leaving the property free.
    only = json.loads(copy_constrained(TODO, "add", implied=True, tool_name="add_todo"))["properties"]
    assert only["title"]["enum"] == ["add"]


def test_an_enum_value_the_text_names_alone_is_the_propertys() -> None:
    assert complete(TODO, {"title": "x", "status": "done"}, "any open tasks?")["status"] == "open"
    assert complete(TODO, {"title": "x"}, "mark it in progress")["status"] == "in_progress"
    assert "status" not in complete(TODO, {"title": "x"}, "open or done?")  # two named: not guessed
    # A named value that is a word of the tool's own name is its verb, not a choice.
    assert complete(TODO, {"title": "x"}, "done: open the door", tool_name="done_todo")["status"] == "open"


def test_a_list_of_addresses_the_fill_left_empty_gets_the_addresses_written() -> None:
    schema = json.dumps(
        {
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "attendees": {"type": "array", "items": {"type": "string", "format": "email"}},
            },
        }
    )
    text = "lunch with dan@corp.com and lee@corp.com"
    assert complete(schema, {"title": "lunch", "attendees": []}, text)["attendees"] == ["dan@corp.com", "lee@corp.com"]
    assert complete(schema, {"attendees": ["dan@corp.com"]}, text)["attendees"] == ["dan@corp.com"]  # it chose


def test_a_quotation_is_one_value_and_another_formats_value_is_no_part_of_this_one() -> None:
    message = "add 'renew passport' to my list, due 2026-03-31 and mark it urgent"
    title = json.loads(copy_constrained(TODO, message, implied=True, tool_name="add_todo"))["properties"]["title"]
    assert "renew passport" in title["enum"]
    assert "renew" not in title["enum"] and "passport" not in title["enum"]  # parts of the quotation
    assert not any("2026-03-31" in o for o in title["enum"])  # the date is ``due``'s
    assert quotations("don't 'x'", "what's “y z”") == ["x", "y z"]  # apostrophes open no quotation


PAGE = json.dumps(
    {
        "type": "object",
        "properties": {"team": {"type": "string"}, "message": {"type": "string"}, "project": {"type": "string"}},
        "required": ["team", "message"],
    }
)


def test_a_span_written_beside_a_propertys_name_is_that_propertys_alone() -> None:
    props = json.loads(copy_constrained(PAGE, "page the database team, sev1: replica lag", implied=True))["properties"]
    assert props["team"]["enum"] == ["database"]  # "the database team": the label after, an article before
    assert "database" not in props["message"]["enum"] and "sev1" in props["message"]["enum"]  # not across a comma
    props = json.loads(copy_constrained(PAGE, "tell project QA for the flaky test", implied=True))["properties"]
    assert props["project"]["enum"][0] == "QA" and "flaky" not in props["project"]["enum"]  # up to a function word
    assert "QA" not in props["team"]["enum"]  # another property's label is not this one's while it has others
    # No label anywhere: every span stays an option of every property.
    props = json.loads(copy_constrained(PAGE, "ping Lena about the rollout", implied=True))["properties"]
    assert props["team"]["enum"] == props["message"]["enum"]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("errors of checkout-service for the last 2 hours", [(2.0, "hour")]),
        ("free for an hour on 2026-02-17 at 7:30", [(1.0, "hour")]),  # a date, a time: no amount
        (
            "2 people, under $150 a night, 30min, v3.8.1, INFRA-77, #88",
            [(2.0, None), (150.0, None), (30.0, "minute"), (88.0, None)],
        ),
        ("snooze it for twenty minutes", [(20.0, "minute")]),
        ("a 45-minute slot for order 5521-003", [(45.0, "minute")]),  # a unit hyphened on; an id's parts none
    ],
)
def test_an_amount_is_a_number_written_on_its_own_with_its_time_unit(
    text: str, found: list[tuple[float, str | None]]
) -> None:
    assert ENGLISH.quantities(text) == found


LOGS = json.dumps(
    {
        "type": "object",
        "properties": {
            "service": {"type": "string"},
            "since_minutes": {"type": "integer", "minimum": 1},
            "limit": {"type": "integer", "maximum": 100},
        },
        "required": ["service", "since_minutes"],
    }
)


def test_a_numeric_property_is_offered_the_amounts_in_the_unit_its_name_names_and_grounds_them() -> None:
    message = "errors of checkout-service on 2026-02-17, the last 2 hours, top 5"
    props = json.loads(copy_constrained(LOGS, message, implied=True))["properties"]
    assert props["since_minutes"] == {"type": "integer", "enum": [120]}  # 2 hours; not 2026 of the date
    # A property naming no unit: the number as written, less the 2 that a time unit labels for the window.
    assert props["limit"] == {"type": "integer", "enum": [5]}
    props = json.loads(copy_constrained(LOGS, "top 500 since 1.5 hours", implied=True))["properties"]
    assert "limit" not in props  # 500 is over its maximum, 1.5 no whole number: no option, and it is optional
    assert 90 in props["since_minutes"]["enum"]  # 1.5 hours, beside its time unit
    assert ground({"service": "checkout-service", "since_minutes": 120}, LOGS, message).invented == ()
    # Converted for the property that names the unit only: 120 is no amount of a property with no unit.
    assert ground({"service": "checkout-service", "since_minutes": 1, "limit": 120}, LOGS, message).invented


RATE = json.dumps(
    {
        "type": "object",
        "properties": {"base": {"type": "string"}, "target": {"type": "string"}, "amount": {"type": "number"}},
        "required": ["base", "target"],
    }
)


def test_a_number_alone_is_the_numeric_propertys_not_a_string_propertys() -> None:
    """One mention, one argument: the amount the user wrote is not offered as a currency or a service name."""
    props = json.loads(copy_constrained(RATE, "how many francs for 2,500 euros?", implied=True))["properties"]
    assert props["amount"] == {"type": "number", "enum": [2500.0]}
    assert "2,500" not in props["base"]["enum"] and "euros" in props["base"]["enum"]
    logs = json.loads(copy_constrained(LOGS, "grep payments logs over the last 2 hours", implied=True))["properties"]
    assert "2" not in logs["service"]["enum"] and "payments" in logs["service"]["enum"]
    # A tool with no numeric property keeps a number as a name ("order 88014562"), and a string property with
    # nothing else to offer keeps it too.
    order = json.dumps({"type": "object", "properties": {"order_id": {"type": "string"}}})
    tracked = json.loads(copy_constrained(order, "track 88014562", implied=True))["properties"]
    assert "88014562" in tracked["order_id"]["enum"]
    assert json.loads(copy_constrained(RATE, "2500", implied=True))["properties"]["base"]["enum"] == ["2500"]


def test_the_time_units_have_one_table() -> None:
    assert math_words.units_in("hour", "minute") == SECONDS["hour"] / SECONDS["minute"]
    assert units.convert(1, "h", "min") == in_unit(1, "hour", "minute") == 60


def test_an_optional_property_the_fill_left_out_gets_the_one_value_labelled_for_it() -> None:
    message = "add 'renew passport' to my Personal list, due 2026-03-31"
    assert complete(TODO, {"title": "renew passport"}, message)["list"] == "Personal"
    assert "list" not in complete(TODO, {"title": "renew passport"}, "add 'renew passport' please")  # no label
    assert complete(TODO, {"title": "x", "list": "Work"}, message)["list"] == "Work"  # the fill's value stands
    # Of two spans labelled, one inside the other, the one nearest the label ("for Leo to my Personal list").
    nested = "add 'buy a present for Leo' to my Personal list"
    assert complete(TODO, {"title": "buy a present for Leo"}, nested)["list"] == "Personal"


def test_a_description_s_opening_words_label_a_value_like_the_property_s_name() -> None:
    assert heading("Speaker or device name; defaults to the active device.", ENGLISH) == {"speaker"}
    assert heading("Branch, tag or commit SHA.", ENGLISH) == {"branch"}
    assert heading("2 letter country code", ENGLISH) == {"letter"}  # a number is no label
    assert heading("One-line summary of the issue.", ENGLISH) == {"line", "summary"}  # nor a sign
    assert heading("What to play.", ENGLISH) == frozenset()
    play = json.dumps(
        {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to play."},
                "device": {"type": "string", "description": "Speaker or device name."},
            },
            "required": ["query"],
        }
    )
    message = "play some Fleetwood Mac on the kitchen speaker"
    props = json.loads(copy_constrained(play, message, implied=True))["properties"]
    assert props["device"]["enum"] == ["kitchen"]  # "speaker" opens the description: the span before it
    assert "kitchen" not in props["query"]["enum"]  # labelled for the device, no option of the query
    assert complete(play, {"query": "Fleetwood Mac"}, message)["device"] == "kitchen"


def test_a_list_of_a_format_is_narrowed_to_the_values_written_and_left_out_when_none_is() -> None:
    invite = json.dumps(
        {
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "attendees": {"type": "array", "items": {"type": "string", "format": "email"}},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["title"],
        }
    )
    named = "set up 'Sync' with ana@contoso.com and li.wei@contoso.com"
    props = json.loads(copy_constrained(invite, named, implied=True))["properties"]
    assert props["attendees"]["items"]["enum"] == ["ana@contoso.com", "li.wei@contoso.com"]
    assert props["attendees"]["maxItems"] == 2
    # Nobody named: the model invented addresses until the token limit; the optional list is left out.
    unnamed = json.loads(copy_constrained(invite, "set up 'Sync' tomorrow", implied=True))["properties"]
    assert "attendees" not in unnamed and "tags" in unnamed  # a list of no format is the model's


HOTELS = json.dumps(
    {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "guests": {"type": "integer", "description": "Number of guests.", "minimum": 1},
            "max_price_per_night": {"type": "number", "description": "Upper price limit per night."},
        },
        "required": ["city"],
    }
)


def test_an_amount_beside_a_word_of_a_numeric_propertys_name_is_that_propertys_alone() -> None:
    message = "a hotel in Kyoto from 2027-04-02 to 2027-04-06 for 3 of us, nothing over 200 a night"
    props = json.loads(copy_constrained(HOTELS, message, implied=True))["properties"]
    assert props["max_price_per_night"] == {"type": "number", "enum": [200.0]}  # "a night" labels it
    assert props["guests"] == {"type": "integer", "enum": [3]}  # 200 is the price's: no count of guests
    alone = json.loads(copy_constrained(HOTELS, "a hotel in Lisbon, just me, under 150 a night", implied=True))
    assert "guests" not in alone["properties"]  # optional, and its one amount is the price's
    # After the fill: the one amount no argument holds goes to the one numeric property left unset.
    assert complete(HOTELS, {"city": "Kyoto", "max_price_per_night": 200}, message)["guests"] == 3
    assert "guests" not in complete(HOTELS, {"city": "Kyoto 3", "max_price_per_night": 200}, message)  # held


@pytest.mark.parametrize(
    ("text", "value", "written"),
    [
        ("How has MSFT done over the last year?", "1y", True),
        ("How has MSFT done over the last year?", "1m", False),
        ("weekly closes for the past six months", "6m", True),  # a count in words
        ("errors in the last 30 minutes", "30m", True),  # the same letter, another period: the list says which
        ("in 1080p please", "1080p", True),  # a code no period abbreviates is read as written
        ("the last 6 months", "6d", False),
    ],
)
def test_a_count_and_a_periods_first_letters_is_written_as_that_count_of_the_period(
    text: str, value: str, written: bool
) -> None:
    assert ENGLISH.mentions(text, value) is written


def test_another_form_of_a_propertys_name_labels_the_span_after_it_across_a_glue_word() -> None:
    tickets = json.dumps(
        {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Free-text search."},
                "assignee": {"type": "string", "description": "Username the issues are assigned to."},
                "project": {"type": "string", "description": "Project key."},
            },
        }
    )
    props = json.loads(copy_constrained(tickets, "which tickets assigned to mkowalski are open?", implied=True))
    assert props["properties"]["assignee"]["enum"] == ["mkowalski"]
    # The name itself before a glue word labels nothing: "project for" is no label of what follows.
    props = json.loads(copy_constrained(tickets, "the project for mkowalski", implied=True))["properties"]
    assert props["project"]["enum"] == props["query"]["enum"]
    # A form of a word that names two properties labels neither ("checking in": check_in or check_out?).
    stay = json.dumps(
        {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "check_in": {"type": "string", "format": "date"},
                "check_out": {"type": "string", "format": "date"},
            },
        }
    )
    props = json.loads(copy_constrained(stay, "Edinburgh, checking in 2027-03-05 and out 2027-03-08", implied=True))
    assert props["properties"]["check_out"]["enum"] == ["2027-03-05", "2027-03-08"]
