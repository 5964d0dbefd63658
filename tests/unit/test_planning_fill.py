"""The fill step against a scripted generator: what the model is shown, and when it is not asked at all."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from services.router.planning.copying import applies, copy_constrained, pinned, unmentioned
from services.router.planning.inputs import restated
from services.router.planning.judges import Decision, Verdict
from services.router.planning.settings import SelectorSettings
from services.router.planning.spans import spans
from services.router.sessions.records import ToolRecord
from services.router.turn.progress import TurnCounters
from services.runtime.language import ENGLISH
from services.tools.builtin import calculator, clock, kb_search, unit_convert
from services.tools.convert import spec_to_proto
from tests.support.planning import FixedIndex, FixedJudge, Scripted, band, chose, filler, planner_with, record, turn

OK = common_pb2.TOOL_CALL_STATUS_OK


SPECS = [spec_to_proto(t) for t in (calculator.TOOL, clock.make_tool(), unit_convert.TOOL, kb_search.make_tool())]


async def test_a_fill_the_grammar_leaves_one_choice_for_runs_no_generation() -> None:
    gen = Scripted()
    counters = TurnCounters()
    calls = await filler(gen).fill(SPECS, ["kb_search", "clock"], {}, turn("What time is it in Lisbon?"), counters)
    assert [(c.name, c.arguments) for c in calls] == [
        ("kb_search", {"query": "What time is it in Lisbon"}),
        ("clock", {"timezone": "Lisbon"}),
    ]
    assert gen.asked == [] and counters.generations == 0


async def test_that_result_is_read_as_the_previous_number_and_then_the_message_stands_alone() -> None:
    last = record("What is 50*4?", "50*4 = 200.", "calculator", {"expression": "50*4"}, {"result": 200})
    gen = Scripted('{"expression":"200/8"}')
    calls = await filler(gen).fill(SPECS, ["calculator"], {}, turn("Now split that by 8.", last), TurnCounters())
    assert calls[0].arguments == {"expression": "200/8"}  # 200 is grounded by the earlier turn
    prompt = [m.content for m in gen.asked[0].messages]
    assert prompt[-1] == "Now split 200 by 8."  # the reference resolved before the model reads it
    # Nothing of the earlier turn to copy back: shown "What is 50*4?" as the nearest example, the model wrote "50*4".
    assert "What is 50*4?" not in prompt and "Earlier" not in " ".join(prompt)


async def test_a_fraction_of_that_result_is_copied_without_a_generation() -> None:
    last = record("What is 250*4?", "250*4 = 1000.", "calculator", {"expression": "250*4"}, {"result": 1000})
    counters = TurnCounters()
    message = turn("ok now take a fifth of that", last)
    calls = await filler(Scripted()).fill(SPECS, ["calculator"], {}, message, counters)
    assert calls[0].arguments == {"expression": "a fifth of 1000"} and counters.generations == 0
    assert calculator.evaluate("a fifth of 1000") == 200


def test_that_price_is_the_previous_number_too() -> None:
    assert ENGLISH.with_previous_result("What would 100 of them cost at that price?", "0.75") == (
        "What would 100 of them cost at 0.75?"
    )


def test_what_time_is_it_is_not_a_reference_to_a_number() -> None:
    assert ENGLISH.with_previous_result("What time is it?", "144") == "What time is it?"
    assert ENGLISH.with_previous_result("Double it.", "144") == "Double 144."


def test_a_bare_number_follow_up_is_the_previous_ask_with_that_number() -> None:
    last = record("Convert 20 celsius to fahrenheit", "20 °C = 68 °F.", "unit_convert", {}, {"result": 68})
    again = restated(turn("And 30?", last), ENGLISH)
    assert again.message == "Convert 30 celsius to fahrenheit"
    assert (again.previous_message, again.previous_calls, again.previous_result) == ("", (), "")  # it stands alone
    assert restated(turn("What about -4.5?", last), ENGLISH).message == "Convert -4.5 celsius to fahrenheit"
    two = record("What is 12*12?", "144", "calculator", {}, {"result": 144})
    assert restated(turn("And 13?", two), ENGLISH).message == "And 13?"  # which number it replaces is not ours to guess
    assert restated(turn("And 30 kg?", last), ENGLISH).message == "And 30 kg?"  # more than a number: planned as it came
    assert restated(turn("And 30?"), ENGLISH).message == "And 30?"  # no earlier turn


async def test_a_follow_up_of_the_same_tool_may_copy_from_the_turn_it_follows() -> None:
    last = record("How many pounds is 2 kg?", "2 kg = 4.40925 lb.", "unit_convert", {}, {"result": 4.40925})
    last.tool_calls[0].arguments_json = json.dumps({"quantity": "2 kg", "to_unit": "pounds"})
    gen = Scripted('{"quantity":"7 kg","to_unit":"pounds"}')
    calls = await filler(gen).fill(SPECS, ["unit_convert"], {}, turn("What about 7 kg?", last), TurnCounters())
    assert calls[0].arguments == {"quantity": "7 kg", "to_unit": "pounds"}
    schema = json.loads(gen.asked[0].json_schema)
    assert "pounds" in schema["properties"]["to_unit"]["enum"]  # the unit asked for before is copyable


def test_a_turns_single_result_is_one_numeric_result_or_nothing() -> None:
    one = record("What is 2 kg in lb?", "", "unit_convert", {}, {"result": 4.40925})
    assert one.single_result() == "4.40925"
    clock_turn = record("time in Oslo?", "", "clock", {}, {"time": "14:03"})
    assert clock_turn.single_result() == ""
    two = record("", "", "calculator", {}, {"result": 1})
    two.tool_calls.append(ToolRecord("c2", "calculator", "{}", status=OK, output_json='{"result": 2}'))
    assert two.single_result() == ""  # which one "that" means is not ours to guess
    two.tool_calls[1].status = common_pb2.TOOL_CALL_STATUS_FAILED
    assert two.single_result() == "1" and two.successful_calls() == (("calculator", {}),)


async def test_an_expression_the_message_holds_is_copied_without_a_generation() -> None:
    gen = Scripted()
    counters = TurnCounters()
    for message, expression in [
        ("Calculate 5 to the power of 3", "5 to the power of 3"),  # the 135M model wrote "5+3"
        ("Take 25 away from 300", "Take 25 away from 300"),  # and "25-300"
        ("Work out 7 times 8 minus 5, please", "7 times 8 minus 5"),
    ]:
        calls = await filler(gen).fill(SPECS, ["calculator"], {}, turn(message), counters)
        assert [c.arguments for c in calls] == [{"expression": expression}]
        assert calculator.evaluate(expression) == {"5 to the power of 3": 125, "7 times 8 minus 5": 51}.get(
            expression, 275
        )
    assert gen.asked == [] and counters.generations == 0


async def test_an_expression_is_composed_when_the_message_does_not_hold_it_as_written() -> None:
    # "(12 + 8) * 3" is copied with its parentheses, which balance; "2*(3+4" holds none that do.
    gen = Scripted('{"expression":"2*(3+4)"}', '{"expression":"4*3.75+2.50"}')
    calls = await filler(gen).fill(SPECS, ["calculator"], {}, turn("calculate (12 + 8) * 3"), TurnCounters())
    assert calls[0].arguments == {"expression": "(12 + 8) * 3"} and gen.asked == []
    calls = await filler(gen).fill(SPECS, ["calculator"], {}, turn("what's 2*(3+4"), TurnCounters())
    assert calls[0].arguments == {"expression": "2*(3+4)"} and len(gen.asked) == 1
    message = "I got 4 coffees at $3.75 each and a muffin for $2.50. What did I spend?"
    calls = await filler(gen).fill(SPECS, ["calculator"], {}, turn(message), TurnCounters())
    assert calls[0].arguments == {"expression": "4*3.75+2.50"} and len(gen.asked) == 2


def test_a_span_keeps_parentheses_only_when_they_balance_inside_it() -> None:
    found = spans("compute (12 + 8) * 5, or convert 5 kg (11 lb)", max_words=6)
    assert "(12 + 8) * 5" in found  # bare, its words join into "12 + 8 * 5", which the copy then refuses
    assert "(11 lb)" not in found and "11 lb" in found  # wrapped whole: offered bare
    assert not any(s.count("(") != s.count(")") for s in found)


async def test_an_earlier_expression_is_never_copied_as_this_turns() -> None:
    last = record("What is 50*4?", "50*4 = 200.", "calculator", {"expression": "50*4"}, {"result": 200})
    gen = Scripted('{"expression":"200/8"}')
    calls = await filler(gen).fill(SPECS, ["calculator"], {}, turn("Share that among 8 people", last), TurnCounters())
    assert calls[0].arguments == {"expression": "200/8"} and len(gen.asked) == 1  # not "50*4" from the earlier turn


@pytest.mark.parametrize(
    ("decision", "planned"),
    [
        ('{"tool":"calculator","arguments":{"expression":"24*7"}}', [("calculator", {"expression": "24*7"})]),
        ('{"tool":"none"}', []),
        ('{"tool":"calculator","arguments":{"expression":"24*9"}}', []),  # 9 is grounded nowhere: dropped
    ],
)
async def test_the_ambiguous_band_decides_and_fills_in_one_generation(
    decision: str, planned: list[tuple[str, dict[str, Any]]]
) -> None:
    gen = Scripted(decision)
    counters = TurnCounters()
    planner = planner_with(gen, band("calculator", "clock"))
    plan = await planner.plan(SPECS, turn("How long is a week in hours?"), counters)
    assert [(c.name, c.arguments) for c in plan.calls] == planned
    assert counters.generations == 1 and plan.method == agent_pb2.TOOL_SELECTION_LLM
    options = json.loads(gen.asked[0].json_schema)["anyOf"]
    # The embedding ranks which tool, the model judges whether: shown the best-ranked candidate only.
    assert [o["properties"]["tool"]["const"] for o in options] == ["none", "calculator"]
    shown = [m.content for m in gen.asked[0].messages]
    assert '{"tool":"none"}' in shown and shown[-1] == "How long is a week in hours?"
    assert not any("clock" in m for m in shown)


async def test_an_undecided_clause_is_chosen_for_among_its_best_ranked_candidate_alone() -> None:
    gen = Scripted('{"tools":["clock"]}', '{"timezone":"Lima"}')
    clause = ("what time is it in Lima", ("clock", "calculator"))
    decided = FixedJudge(
        Verdict(Decision.TOOLS, tools=("calculator",), segments={"calculator": "12*7"}, undecided=(clause,))
    )
    plan = await planner_with(gen, decided).plan(SPECS, turn("12*7 and what time is it in Lima"), TurnCounters())
    assert json.loads(gen.asked[0].json_schema)["properties"]["tools"]["items"]["enum"] == ["clock"]
    assert {c.name for c in plan.calls} == {"calculator", "clock"}


async def test_the_band_shows_the_model_as_many_ranked_candidates_as_configured() -> None:
    gen = Scripted('{"tool":"clock","arguments":{"timezone":"Lima"}}')
    planner = planner_with(gen, band("calculator", "clock"), settings=SelectorSettings(band_candidates=2))
    plan = await planner.plan(SPECS, turn("Is it dark in Lima yet? I land in 3 hours."), TurnCounters())
    options = json.loads(gen.asked[0].json_schema)["anyOf"]
    assert [o["properties"]["tool"]["const"] for o in options] == ["none", "calculator", "clock"]
    assert [(c.name, c.arguments) for c in plan.calls] == [("clock", {"timezone": "Lima"})]
    with pytest.raises(ValueError, match="--selector-band-candidates"):
        SelectorSettings(band_candidates=4)


@pytest.mark.parametrize(
    ("message", "expression"),
    [("minutes in a week?", "minutes in a week"), ("what's twelve times eleven", "twelve times eleven")],
)
async def test_an_ambiguous_message_holding_a_calculator_span_is_the_calculators_without_a_generation(
    message: str, expression: str
) -> None:
    gen = Scripted()  # any generation would fail: nothing is scripted
    counters = TurnCounters()
    plan = await planner_with(gen, band("calculator", "clock")).plan(SPECS, turn(message), counters)
    assert [(c.name, c.arguments) for c in plan.calls] == [("calculator", {"expression": expression})]
    assert counters.generations == 0 and plan.method == agent_pb2.TOOL_SELECTION_EMBEDDING
    assert calculator.evaluate(expression) in (10080, 132)


@pytest.mark.parametrize(
    ("message", "lead", "planned"),
    [
        ("Is it past midnight in Hong Kong?", 0.26, [("clock", {"timezone": "Hong Kong"})]),
        (
            "I want to ring my sister in Mexico City. Would she still be at work?",
            0.28,
            [("clock", {"timezone": "Mexico City"})],
        ),
        ("Is it past midnight in Hong Kong?", 0.19, []),  # not the lead no intent word overrules: the model decides
        ("What's actually the difference between GMT and UTC?", 0.3, []),  # two places: the model decides
        ("Why do time zones exist?", 0.3, []),  # no place at all
    ],
)
async def test_a_band_ask_well_ahead_that_names_its_one_argument_is_the_tools_without_a_generation(
    message: str, lead: float, planned: list[tuple[str, dict[str, Any]]]
) -> None:
    gen = Scripted('{"tool":"none"}')  # what the band's generation says when asked
    counters = TurnCounters()
    planner = planner_with(gen, band("clock", scores={"clock": 0.4 + lead}, none_score=0.4))
    plan = await planner.plan(SPECS, turn(message), counters)
    assert [(c.name, c.arguments) for c in plan.calls] == planned
    decided_here = bool(planned)
    assert (counters.generations, plan.method) == (
        (0, agent_pb2.TOOL_SELECTION_EMBEDDING) if decided_here else (1, agent_pb2.TOOL_SELECTION_LLM)
    )


@pytest.mark.parametrize(
    ("message", "lead", "planned"),
    [
        (
            "My sister just moved to Seoul. Would she be having dinner around now?",
            0.07,
            [("clock", {"timezone": "Seoul"})],
        ),
        ("My sister just moved to Seoul. Would she be having dinner around now?", 0.05, []),  # under pin_lead
        ("Is it past midnight in Hong Kong?", 0.07, []),  # no intent word: it needs the overrule lead
        ("Is it later now in Paris or in Rome?", 0.15, []),  # an intent word, but two places
    ],
)
async def test_a_band_ask_sharing_an_intent_word_needs_only_the_pin_lead(
    message: str, lead: float, planned: list[tuple[str, dict[str, Any]]]
) -> None:
    gen = Scripted('{"tool":"none"}')  # what the band's generation says when asked
    counters = TurnCounters()
    index = FixedIndex(intents={"clock": frozenset({"now"})})
    planner = planner_with(gen, band("clock", scores={"clock": 0.4 + lead}, none_score=0.4), index)
    plan = await planner.plan(SPECS, turn(message), counters)
    assert [(c.name, c.arguments) for c in plan.calls] == planned
    assert counters.generations == (0 if planned else 1)


def test_a_tool_is_pinned_by_one_own_mention_of_each_argument_it_copies() -> None:
    convert = json.dumps(unit_convert.TOOL.parameters)
    assert pinned(convert, "how many ounces is 1.2 kg of cheese")
    assert not pinned(convert, "Why is a foot called a foot?")  # a quantity, no target unit of its own
    assert not pinned(convert, "what's the difference between a metric ton and a short ton?")  # two of each
    assert not pinned(json.dumps(kb_search.make_tool().parameters), "How do sessions work?")  # the message, whole


def test_a_quantity_in_a_known_unit_is_preferred_and_an_unknown_unit_still_copied() -> None:
    schema = json.dumps(unit_convert.TOOL.parameters)
    copied = json.loads(copy_constrained(schema, "He's 6 feet tall. What's that in centimeters?"))["properties"]
    assert copied["quantity"]["enum"] == ["6 feet"] and copied["to_unit"]["enum"] == ["centimeters"]
    unknown = json.loads(copy_constrained(schema, "convert 2 furlongs to meters"))["properties"]
    assert unknown["quantity"]["enum"] == ["2 furlongs"]  # the tool then says it does not know furlongs


async def test_a_composed_expression_is_held_to_notation_and_a_copied_one_is_not() -> None:
    gen = Scripted('{"expression":"12*15"}')
    ask = turn("If I save $15 a week, how much after 12 weeks?")
    await filler(gen).fill(SPECS, ["calculator"], {}, ask, TurnCounters())
    prop = json.loads(gen.asked[0].json_schema)["properties"]["expression"]
    assert re.search(prop["pattern"], "12*15") and re.search(prop["pattern"], "15*52")  # 52: weeks in a year
    assert not re.search(prop["pattern"], "12 weeks x $15 per week")  # what the 135M model wrote, unconstrained
    # Only grounded numbers can be written: none invented, none run together out of grounded digits.
    assert not any(re.search(prop["pattern"], e) for e in ("12*16", "1215", "15*5", "12.15"))
    # A function is written with its parenthesis: bare names ran together ("5.4 mintanroundof…") to the limit.
    assert re.search(prop["pattern"], "max(12, 15)") and not re.search(prop["pattern"], "12 max 15")
    assert "x-agentmesh-compose-pattern" not in gen.asked[0].json_schema
    assert "maxLength" not in prop  # xgrammar refuses a pattern beside length bounds

    import xgrammar
    from vllm.v1.structured_output.backend_xgrammar import has_xgrammar_unsupported_json_features

    assert not has_xgrammar_unsupported_json_features(json.loads(gen.asked[0].json_schema))
    xgrammar.Grammar.from_json_schema(gen.asked[0].json_schema)  # the engine's grammar compiler takes it


async def test_a_tool_chosen_from_a_clause_without_its_quantity_fills_from_the_whole_message() -> None:
    message = "Bought a 2 litre bottle for the party, how many cups does that come to?"
    gen = Scripted()  # the grammar leaves one quantity and one unit: no generation
    planner = planner_with(gen, chose({"unit_convert": "how many cups does that come to"}))
    plan = await planner.plan(SPECS, turn(message), TurnCounters())
    assert [(c.name, c.arguments) for c in plan.calls] == [("unit_convert", {"quantity": "2 litre", "to_unit": "cups"})]
    assert gen.asked == []


def test_a_conversion_needs_a_target_unit_of_its_own_not_the_quantitys() -> None:
    schema = json.dumps(unit_convert.TOOL.parameters)
    assert not applies(schema, "Why is a marathon 26.2 miles and not a round number?")  # "miles" is the quantity's
    assert applies(schema, "Is 5 pounds more than 2 kilos? What is 5 pounds in kilos?")  # another quantity's unit
    assert applies(schema, "How many feet is 3 meters?")
    assert applies(schema, "What about 7 kg?", "Convert 5 lb to kg")  # the target said the turn before
    clause = "the motorway signs say 130 km/h"
    assert unmentioned(schema, clause) == {"to_unit"}
    assert unmentioned(schema, f"Renting a car next week and {clause}, what's that in mph?") == frozenset()


async def test_a_clause_without_its_tools_target_unit_fills_from_the_whole_message() -> None:
    message = "Renting a car next week and the motorway signs say 130 km/h, what's that in mph?"
    gen = Scripted('{"quantity":"130 km/h","to_unit":"mph"}')
    planner = planner_with(gen, chose({"unit_convert": "the motorway signs say 130 km/h"}))
    plan = await planner.plan(SPECS, turn(message), TurnCounters())
    assert [(c.name, c.arguments) for c in plan.calls] == [("unit_convert", {"quantity": "130 km/h", "to_unit": "mph"})]
    to_unit = json.loads(gen.asked[0].json_schema)["properties"]["to_unit"]
    assert "mph" in to_unit["enum"] and "km/h" not in to_unit["enum"]


def described(name: str, description: str, properties: dict[str, Any], required: list[str]) -> common_pb2.ToolSpec:
    """A tool as an MCP server or an OpenAI ``tools`` list brings it: a name, a description and a schema."""
    schema = {"type": "object", "properties": properties, "required": required}
    return common_pb2.ToolSpec(name=name, description=description, parameters_json_schema=json.dumps(schema))


TRANSLATE = described(
    "translate_text",
    "Translate text between languages.",
    {
        "text": {"type": "string", "description": "Text to translate."},
        "target_language": {"type": "string", "description": "Language to translate into."},
    },
    ["text", "target_language"],
)


def test_a_quotation_is_offered_whole_past_the_longest_span() -> None:
    message = "translate 'the meeting has been moved to Thursday' into German"
    schema = json.loads(copy_constrained(TRANSLATE.parameters_json_schema, message, implied=True))
    # Seven words, past the longest span an implied copy offers, and a part of it is no value: offered whole.
    assert schema["properties"]["text"]["enum"][0] == "the meeting has been moved to Thursday"
    assert "moved to Thursday" not in schema["properties"]["text"]["enum"]


ONCALL = described(
    "get_oncall_schedule",
    "Who is on call for a team.",
    {
        "team": {"type": "string", "description": "Team name."},
        "date": {"type": "string", "format": "date", "description": "Day to look up; defaults to now."},
    },
    ["team"],
)
REMINDER = described(
    "set_reminder",
    "Set a reminder.",
    {
        "text": {"type": "string", "description": "What to be reminded of."},
        "when": {"type": "string", "description": "When to fire."},
    },
    ["text", "when"],
)


def test_a_time_said_on_its_own_is_a_value_only_of_a_property_about_time() -> None:
    assert [ENGLISH.says_when(t) for t in ("today", "this weekend", "20 minutes", "7am tomorrow")] == [True] * 4
    assert not any(ENGLISH.says_when(t) for t in ("payments today", "2026-05-01", "H-55012", "min price", ""))
    message = "who's on call for networking this weekend?"
    team = json.loads(copy_constrained(ONCALL.parameters_json_schema, message, implied=True))["properties"]["team"]
    assert "networking" in team["enum"] and not any(ENGLISH.says_when(o) for o in team["enum"])
    message = "remind me to take the chicken out of the freezer in 20 minutes"
    props = json.loads(copy_constrained(REMINDER.parameters_json_schema, message, implied=True))["properties"]
    assert "20 minutes" in props["when"]["enum"]
    assert props["text"]["enum"] and not any(ENGLISH.says_when(o) for o in props["text"]["enum"])
