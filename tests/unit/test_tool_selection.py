"""Tool selection logic on a fake embedder; grounding of derived numbers; tool messages and answer openings."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence

import pytest

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from agentmesh.tools.v1 import tools_pb2
from services.router.planning.copying import applies, copy_constrained
from services.router.planning.fill import determined
from services.router.planning.grounding import declared_constants, ground, ungrounded
from services.router.planning.hints import COPY_KEYWORD
from services.router.planning.inputs import PlanInput
from services.router.planning.intent_words import intent_words
from services.router.planning.judges import Decision, Verdict
from services.router.planning.planner import scored_ask
from services.router.planning.settings import SelectorSettings
from services.router.planning.spans import spans
from services.router.turn.progress import TurnCounters
from services.router.turn.prompt import Message, answer_messages, answer_opening, tool_messages
from services.runtime.language import ENGLISH
from services.tools.builtin import calculator, clock, kb_search, unit_convert
from services.tools.convert import spec_to_proto
from tests.support.planning import BagOfWords, FixedJudge, Selector, planner_with

words = ENGLISH.content_words
clauses = ENGLISH.clauses
numbers_in = ENGLISH.numbers_in


def spec(name: str, examples: Sequence[str], negatives: Sequence[str] = ()) -> common_pb2.ToolSpec:
    return common_pb2.ToolSpec(
        name=name,
        description=f"the {name} tool",
        examples=[common_pb2.ToolExample(text=e) for e in examples],
        negative_examples=list(negatives),
    )


SPECS = [
    spec("weather", ["weather forecast rain sunny Oslo", "will it rain tomorrow in Paris weather"], ["what is rain"]),
    spec("stocks", ["stock price share quote ACME", "share price of the stock market quote"]),
]
NO_TOOL = ["write a poem about the sea", "hello there how are you"]


LENIENT = SelectorSettings(choose=0.5, reject=0.2, margin=0.05)


async def selector(settings: SelectorSettings = LENIENT) -> Selector:
    s = Selector(BagOfWords(), settings, no_tool_examples=NO_TOOL)
    await s.load(SPECS)
    return s


async def test_an_intent_word_does_not_overrule_a_much_nearer_no_tool_request() -> None:
    # "weather" is the tool's intent word, but the message is a poem request with a word of weather in it.
    message = "write a poem about the sea and the weather"
    decisions = []
    for overrule in (0.2, 1.0):
        s = Selector(BagOfWords(), SelectorSettings(choose=0.1, reject=0.05, margin=0.05, overrule=overrule), NO_TOOL)
        await s.load(SPECS)
        selection = await s.select(message)
        assert selection.none_score - selection.scores["weather"] > 0.2
        decisions.append(selection.decision)
    assert decisions == [Decision.NONE, Decision.TOOLS]  # the lead of "no tool", not the intent word, decides
    with pytest.raises(ValueError, match="overrule"):
        SelectorSettings(margin=0.1, overrule=0.05)


async def test_shares_intent_reads_the_loaded_tools_intent_words() -> None:
    s = await selector()
    assert s.shares_intent("weather", "what is the weather in Rome?")  # both weather examples use "weather"
    assert not s.shares_intent("weather", "stock quote for ACME")
    assert not s.shares_intent("translate", "any rain in Rome?")  # not a loaded tool
    assert not Selector(BagOfWords(), LENIENT).shares_intent("weather", "rain")  # nothing loaded yet
    with pytest.raises(ValueError, match="pin-lead"):
        SelectorSettings(pin_lead=0.3, overrule=0.2)


async def test_a_clear_ask_selects_its_tool_without_asking_the_model() -> None:
    s = await selector()
    selection = await s.select("weather forecast for Oslo, rain or sunny?")
    assert selection.decision is Decision.TOOLS and selection.tools == ("weather",)
    assert selection.segments == {"weather": "weather forecast for Oslo, rain or sunny?"}


async def test_a_message_near_the_no_tool_examples_needs_no_tool() -> None:
    s = await selector()
    assert (await s.select("write a poem about the sea please")).decision is Decision.NONE
    assert (await s.select("zebra")).decision is Decision.NONE  # far from everything: below reject


async def test_the_band_between_thresholds_is_ambiguous_with_candidates() -> None:
    s = await selector(SelectorSettings(choose=0.9, reject=0.1, margin=0.05))
    selection = await s.select("is the weather nice")
    assert selection.decision is Decision.AMBIGUOUS and selection.candidates[0] == "weather"


async def test_two_asks_select_two_tools_each_with_its_clause() -> None:
    s = await selector()
    message = "weather forecast rain in Oslo and the stock price quote of ACME"
    selection = await s.select(message)
    assert selection.decision is Decision.TOOLS and set(selection.tools) == {"weather", "stocks"}
    assert "Oslo" in selection.segments["weather"] and "ACME" not in selection.segments["weather"]
    assert "ACME" in selection.segments["stocks"]


async def test_a_follow_up_is_scored_with_the_previous_message_only_when_undecided() -> None:
    s = await selector(SelectorSettings(choose=0.45, reject=0.05, margin=0.2))
    alone = await s.select("what about Paris?")
    assert alone.decision is Decision.AMBIGUOUS
    follow = await s.select("what about Paris?", previous_message="weather forecast rain Oslo")
    assert follow.decision is Decision.TOOLS and follow.tools == ("weather",)


async def test_cards_are_embedded_once_per_tool_list() -> None:
    embedder = BagOfWords()
    s = Selector(embedder, no_tool_examples=NO_TOOL)
    await s.load(SPECS)
    await s.load(list(SPECS))
    assert len(embedder.calls) == 1
    await s.load([*SPECS, spec("clock", ["time in Tokyo"])])
    assert len(embedder.calls) == 2


def test_selector_settings_reject_impossible_thresholds() -> None:
    with pytest.raises(ValueError, match="reject <= choose"):
        SelectorSettings(choose=0.3, reject=0.5)


@pytest.mark.parametrize(
    ("message", "parts"),
    [
        ("What is 23*47 and what time is it in Tokyo?", ["What is 23*47", "what time is it in Tokyo"]),
        ("What is 23*47?", []),
        ("salt and pepper", []),  # fragments too short to be asks stay together
        ("Convert 5 km to miles; also what is 2+2", ["Convert 5 km to miles", "what is 2+2"]),
    ],
)
def test_clauses(message: str, parts: list[str]) -> None:
    assert clauses(message) == parts


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"expression": "10/2"}, "What is half of 10?"),
        ({"expression": "0.15*80"}, "What is 15% of 80?"),
        ({"expression": "15/100*80"}, "What is 15% of 80?"),
        ({"expression": "3*60"}, "How many minutes are in 3 hours?"),
        ({"expression": "1234+5"}, "add 5 to 1,234"),
        ({"expression": "90/3"}, "a third of 90"),
        ({"quantity": "5 kg", "to_unit": "pounds"}, "How many pounds is 5 kg?"),
    ],
)
def test_derived_numbers_are_grounded(arguments: dict[str, object], message: str) -> None:
    # Unit arithmetic's constants are the calculator's own (its schema's x-agentmesh-constants), by word.
    constants = declared_constants(json.dumps(calculator.TOOL.parameters), message)
    assert ungrounded(arguments, message, constants=constants) == []


def test_a_declared_constant_needs_its_word_and_an_invented_value_drops_the_call_or_leaves_the_option() -> None:
    schema = json.dumps(calculator.TOOL.parameters)
    assert 60 in declared_constants(schema, "How many minutes are in 3 hours?")
    assert 1000 not in declared_constants(schema, "How much is NVDA trading at?")  # no word of a thousand
    assert ground({"expression": "1000*1000"}, schema, "How much is NVDA trading at?").arguments is None
    forecast = json.dumps(
        {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "units": {"enum": ["metric"]}},
            "required": ["city"],
        }
    )
    kept = ground({"city": "Lisbon", "days": 7, "units": "metric"}, forecast, "Rain in Lisbon next week?")
    assert kept.arguments == {"city": "Lisbon", "units": "metric"}  # 7 is nobody's: the tool's default applies
    assert ground({"city": "US"}, forecast, "Email alice and ask if she is free on Friday").arguments is None
    # An enum value is the schema's, never invented, even when a free-text argument holds the same string.
    both = {"type": "object", "properties": {"note": {"type": "string"}, "units": {"enum": ["metric"]}}}
    assert ground({"note": "metric", "units": "metric"}, json.dumps(both), "Rain in Lisbon?").arguments == {
        "units": "metric"
    }


def test_invented_numbers_are_not_grounded_and_context_grounds_follow_ups() -> None:
    assert ungrounded({"expression": "10000001*4"}, "What is my name?") == [10000001.0, 4.0]
    assert ungrounded({"quantity": "10 km", "to_unit": "b"}, "convert this") == [10.0]
    assert ungrounded({"expression": "1081+6"}, "Now add 6 to that result.") == [1081.0]
    assert ungrounded({"expression": "1081+6"}, "Now add 6 to that result.", "23*47 = 1081.") == []
    assert {0.15, 15.0, 100.0} <= numbers_in("15% of 80")


def result(call_id: str, tool: str, output: str = "", summary: str = "", error: str = "") -> tools_pb2.ToolResult:
    status = common_pb2.TOOL_CALL_STATUS_OK if output else common_pb2.TOOL_CALL_STATUS_FAILED
    return tools_pb2.ToolResult(
        call_id=call_id, tool_name=tool, status=status, output_json=output, summary=summary, error_message=error
    )


def test_tool_results_are_tool_messages_and_the_answer_opens_with_their_summaries() -> None:
    results = [
        result("c1", "calculator", '{"result":1081}', "23*47 = 1081."),
        result("c2", "unit_convert", error="unknown unit 'parsec'"),
    ]
    arguments = {"c1": '{"expression":"23*47"}', "c2": '{"from_unit":"parsec"}'}
    messages = tool_messages(results, arguments)
    assert [(m.role, m.tool_name) for m in messages] == [("tool", "calculator"), ("tool", "unit_convert")]
    assert messages[0].content == 'calculator({"expression":"23*47"}) returned {"result":1081}'
    assert "FAILED: unknown unit 'parsec'" in messages[1].content
    opening = answer_opening(results)
    assert opening == "23*47 = 1081. The unit_convert tool failed: unknown unit 'parsec'."
    prompt = answer_messages("S", [], "q", messages, opening)
    assert [m.role for m in prompt] == ["system", "user", "tool", "tool", "assistant"]
    assert prompt[-1] == Message("assistant", opening)
    assert "system" not in [m.role for m in prompt[1:]]
    # A successful result without a summary: the model opens the answer itself.
    assert answer_opening([result("c3", "kb_search", '{"results":[]}')]) == ""


async def test_an_undecided_second_ask_is_left_to_the_model_not_dropped() -> None:
    s = await selector(SelectorSettings(choose=0.6, reject=0.1, margin=0.0))
    selection = await s.select("stock price share quote of ACME, and is the weather nice")
    assert selection.decision is Decision.TOOLS and selection.tools == ("stocks",)
    assert selection.undecided == (("is the weather nice", ("weather",)),)
    # More words of the same ask are not a second ask.
    same = await s.select("stock price share quote ACME and the share price of the stock")
    assert same.tools == ("stocks",) and same.undecided == ()


async def test_nearest_examples_come_least_to_most_similar() -> None:
    s = await selector()
    examples = [("weather forecast rain sunny Oslo", 1), ("will it rain tomorrow in Paris weather", 2)]
    assert [n for _, n in await s.index.nearest("rain tomorrow in Paris", examples, 2)] == [1, 2]
    assert [n for _, n in await s.index.nearest("sunny Oslo forecast", examples, 1)] == [1]


# --- copy-constrained fills ---------------------------------------------------------------------


def test_spans_stay_inside_a_clause_and_never_start_or_end_on_glue_words() -> None:
    found = spans("What's 144 divided by 12, and how many grams are in 3 pounds?")
    assert "3 pounds" in found and "grams" in found and "divided by 12" in found
    assert not any(s.split()[0].lower() in {"in", "and", "how"} for s in found)
    assert not any(s.split()[-1].lower() in {"in", "are", "by", "a"} for s in found)
    assert "12 and" not in found and "12, and how" not in found  # the comma ends the clause
    assert spans("Fetch https://example.com.") == ["Fetch", "Fetch https://example.com", "https://example.com"]


def test_copy_properties_become_an_enum_of_fitting_spans() -> None:
    schema = copy_constrained(json.dumps(unit_convert.TOOL.parameters), "How many liters are in 3 gallons?")
    properties = json.loads(schema)["properties"]
    assert properties["quantity"] == {"type": "string", "enum": ["3 gallons"]}
    # "gallons" is inside the quantity's only option: one mention fills one argument, so the target is decided.
    assert properties["to_unit"] == {"type": "string", "enum": ["liters"]}
    assert determined(schema) == {"quantity": "3 gallons", "to_unit": "liters"}
    before = "How many pounds is 2 kg? 2 kg ="
    follow_up = json.loads(copy_constrained(json.dumps(unit_convert.TOOL.parameters), "What about 7 kg?", before))
    assert follow_up["properties"]["quantity"]["enum"] == ["7 kg", "2 kg"]
    assert follow_up["properties"]["to_unit"]["enum"] == ["pounds"]  # "kg" is in both quantities


def test_a_copy_property_with_no_fitting_span_stays_free_and_other_schemas_are_untouched() -> None:
    prop = {"type": "string", "maxLength": 64, COPY_KEYWORD: r"^https?://\S+$"}
    schema = {"type": "object", "properties": {"url": prop}, "required": ["url"]}
    free = json.loads(copy_constrained(json.dumps(schema), "open the status page"))
    assert free["properties"]["url"] == {"type": "string", "maxLength": 64}  # the keyword never reaches vLLM
    shown = json.loads(copy_constrained(json.dumps(schema), "open http://a.example/x please"))
    assert shown["properties"]["url"]["enum"] == ["http://a.example/x"]
    plain = json.dumps({"type": "object", "properties": {"expression": {"type": "string"}}})
    assert copy_constrained(plain, "23*47") == plain


# --- intent words: the lexical double-check ----------------------------------------------------

CLOCKS = spec(
    "clock",
    ["What time is it in Tokyo?", "current time in Paris", "what's the date today in Oslo", "time in Lima now"],
    ["What is the capital of Peru?"],
)


def test_intent_words_mark_a_tool_against_everything_else() -> None:
    marks = intent_words([e.text for e in CLOCKS.examples], ["What is the capital of Peru?", *NO_TOOL])
    assert "time" in marks  # 3 of 4 examples, none of the rest ("date": 1 of 4 is too little evidence here)
    assert not marks & {"in", "the", "what", "tokyo", "paris"}  # function words, and words only one example has
    assert words("What's 23*47 in Paris?") == {"<num>", "*", "pari"}  # a plural "s" off, even where it is not one
    # An adverb is its adjective: "Is it currently night in Kathmandu?" has the clock's "current".
    assert words("currently, hourly, early, daily") == {"current", "hour", "early", "daily"}


async def test_a_message_near_a_tool_in_topic_but_not_in_intent_is_left_to_the_model() -> None:
    s = Selector(BagOfWords(), SelectorSettings(choose=0.3, reject=0.1, margin=0.0), no_tool_examples=NO_TOOL)
    await s.load([CLOCKS])
    assert (await s.select("what time is it in Lima")).tools == ("clock",)
    shares = await s.select("restaurants in Paris at dinner time or in Tokyo")  # shares "time": still chosen
    assert shares.decision is Decision.TOOLS
    held = await s.select("good restaurants in Paris and Tokyo")
    assert held.decision is Decision.AMBIGUOUS and held.candidates == ("clock",)


def test_a_phrase_that_only_says_when_holds_no_ask_word() -> None:
    ask_words = ENGLISH.ask_words
    assert ask_words("is it raining in Porto right now?") == {"raining", "porto"}
    assert ask_words("what's the weather over the next 3 days") == {"weather"}  # the count with its unit
    assert ask_words("spent on meals from 2026-11-01 to 2026-11-30 at 15:30 or 3pm") == {"spent", "meal"}
    assert ask_words("at the moment, currently, today, in a few days") == frozenset()
    assert ask_words("is BA 287 on time? next time, tell me") == {"ba", "<num>", "tell"}  # punctual, an occasion
    # A unit neither counted nor qualified is the ask's own word; a count of a unit is a quantity.
    assert ask_words("what day is it?") == {"day"}
    assert ask_words("convert 3 hours to minutes") == {"<num>", "convert", "minute"}


async def test_a_when_phrase_is_no_evidence_for_a_tool_whose_examples_say_when() -> None:
    now_clocks = spec("clock", ["What time is it in Tokyo right now?", "time in Lima now", "the time now in Oslo"])
    assert "now" not in intent_words([e.text for e in now_clocks.examples], NO_TOOL)
    s = Selector(BagOfWords(), SelectorSettings(choose=0.3, reject=0.1, margin=0.0), no_tool_examples=NO_TOOL)
    await s.load([now_clocks])
    assert (await s.select("what time is it in Lima now")).tools == ("clock",)
    held = await s.select("is the pharmacy in Lima open right now")  # near in topic; "now" says only when
    assert held.decision is not Decision.TOOLS


# --- copied arguments that leave one choice need no generation -----------------------------------


def test_a_message_copy_property_is_the_asking_text_whole() -> None:
    schema = json.loads(copy_constrained(json.dumps(kb_search.make_tool().parameters), "Which port does it use?"))
    assert schema["properties"]["query"] == {"type": "string", "enum": ["Which port does it use"]}
    assert determined(json.dumps(schema)) == {"query": "Which port does it use"}  # top_k is optional: left out


def test_a_clock_place_is_copied_from_the_message_or_from_the_turn_it_follows() -> None:
    params = json.dumps(clock.make_tool().parameters)
    one = copy_constrained(params, "What time is it in Mexico City right now?")
    assert determined(one) == {"timezone": "Mexico City"}  # "time", "right now" and "City" alone are no places
    follow_up = copy_constrained(params, "What time is it there?", "I'm planning a trip to Rome next month.")
    assert determined(follow_up) == {"timezone": "Rome"}
    two = json.loads(copy_constrained(params, "Is it later in Tokyo or in Paris?"))
    assert two["properties"]["timezone"]["enum"] == ["Tokyo", "Paris"] and determined(json.dumps(two)) is None
    assert determined(copy_constrained(params, "What's the date today?")) is None  # no place: the model writes one


def test_determined_needs_every_required_property_pinned() -> None:
    pinned = {"type": "object", "properties": {"a": {"enum": ["x"]}, "b": {"enum": ["y", "z"]}}, "required": ["a"]}
    assert determined(json.dumps(pinned)) == {"a": "x"}
    assert determined(json.dumps({**pinned, "required": ["a", "b"]})) is None
    assert determined(json.dumps({**pinned, "required": []})) is None
    # A tool described only: an optional property offered two options is a choice left to the generation.
    assert determined(json.dumps(pinned), open_choices=True) is None
    one_each = {**pinned, "properties": {"a": {"enum": ["x"]}, "b": {"enum": ["y"]}}}
    assert determined(json.dumps(one_each), open_choices=True) == {"a": "x"}


async def weather_with_near_miss(near_miss: str, *, choose: float) -> Selector:
    """A selector over a weather tool (intent words "rain", "forecast") with one near miss, and the stocks tool."""
    weather = spec("weather", ["rain forecast Oslo", "rain forecast Paris", "sunny forecast Rome"], [near_miss])
    # Intent words are learnt against what needs no tool: enough no-tool requests that "rain" stands out.
    no_tool = [*NO_TOOL, "tell me a joke", "the capital of France"]
    s = Selector(BagOfWords(), SelectorSettings(choose=choose, reject=0.2, margin=0.05), no_tool_examples=no_tool)
    await s.load([weather, SPECS[1]])
    return s


async def test_a_tool_is_chosen_when_both_judges_agree_however_narrow_its_lead() -> None:
    # The weather near miss is almost as close as the ask, but the ask shares the tool's intent words: chosen.
    s = await weather_with_near_miss("history of rain forecast Oslo records", choose=0.5)
    selection = await s.select("rain forecast Oslo history today")
    assert selection.decision is Decision.TOOLS and selection.tools == ("weather",)
    assert 0 < selection.scores["weather"] - selection.none_score < 0.05  # a lead narrower than the margin


def test_a_tool_applies_only_when_the_message_holds_what_its_schema_requires() -> None:
    schema = json.dumps(unit_convert.TOOL.parameters)
    assert applies(schema, "How many pounds is 5 kg?")
    assert not applies(schema, "Why does the US still use pounds instead of kilograms?")  # no quantity
    assert applies(schema, "What about in pounds?", "Convert 5 kg to grams", "5 kg = 5000 g.")  # said before
    assert applies(json.dumps(clock.make_tool().parameters), "What's the date today?")  # nothing required


async def test_a_selected_tool_the_message_cannot_fill_is_dropped_before_any_generation() -> None:
    class NoModel:
        async def stream(self, spec: object) -> AsyncIterator[object]:
            raise AssertionError("no generation expected")
            yield

    specs = [spec_to_proto(unit_convert.TOOL), spec_to_proto(clock.make_tool())]
    message = "Why does the US still use pounds instead of kilograms?"
    fixed = FixedJudge(Verdict(Decision.TOOLS, tools=("unit_convert",), segments={"unit_convert": message}))
    planner = planner_with(NoModel(), fixed)
    ask = PlanInput(message, "auto", "", common_pb2.PRIORITY_P1)
    plan = await planner.plan(specs, ask, TurnCounters())
    assert plan.calls == [] and plan.method == agent_pb2.TOOL_SELECTION_EMBEDDING


async def test_a_negative_near_only_in_topic_does_not_stand_against_an_ask_in_intent() -> None:
    # The near miss is about Oslo, not the weather: nearer the message than any example, but it shares none
    # of the tool's intent words ("rain", "forecast"), and the message does ("How many ounces is 1 kilogram?"
    # against "Explain how the kilogram is defined").
    s = await weather_with_near_miss("recount how Oslo got its name Oslo", choose=0.4)
    ask = await s.select("rain Oslo name recount")
    assert ask.decision is Decision.TOOLS and ask.tools == ("weather",)
    assert ask.none_score > ask.scores["weather"]  # nearer in topic
    assert (await s.select("recount how Oslo got its name")).decision is Decision.NONE


def test_numbers_in_words_are_numbers_to_the_intent_check() -> None:
    assert words("what's twelve times eleven") == words("what's 12 times 11")
    assert "<num>" in words("nine times seven minus five")


def test_the_grounded_number_pattern_holds_what_the_conversation_wrote_and_derived() -> None:
    from services.router.planning.grounding import number_pattern

    pattern = f"^{number_pattern('I bought 4 coffees at $3.75 and one muffin for $2.50, 15% off', 'total was 1,450')}$"
    for written in ("4", "3.75", "2.50", "2.5", "0.15", "15", "100", "1,450", "1450", "1"):
        assert re.search(pattern, written), written
    assert not re.search(pattern, "60")  # a constant only where a tool declares it
    assert re.search(number_pattern("3 hours", constants=[60]) or "(?!)", "60")
    assert not any(re.search(pattern, n) for n in ("5", "3.7", "37", "2.51", "-4"))


async def test_a_url_is_embedded_as_words_and_still_marks_the_ask() -> None:
    fetch = spec(
        "fetch", ["summarize https://example.com/news", "what is on https://example.com/a/b"], ["what is a url"]
    )
    embedder = BagOfWords()
    s = Selector(embedder, SelectorSettings(choose=0.3, reject=0.1, margin=0.05), no_tool_examples=NO_TOOL)
    await s.load([fetch])
    picked = await s.select("please read https://example.com/terms/2024/v3?lang=en-gb and give me the gist")
    assert picked.decision is Decision.TOOLS and picked.tools == ("fetch",)
    # The embedder never sees a URL: the cards' and the message's are both "this link" ("terms", "lang"… are
    # no words of the ask), while the intent check still reads the URL's own words ("example", "com").
    await s.index.nearest("fetch https://example.com/x/9", [("read https://example.org/other", None)], 1)  # the fill's
    seen = [t for call in embedder.calls for t in call]
    assert not any("://" in t for t in seen) and "summarize this link" in seen


# --- a question about a concept is not an ask for a tool on nearness alone ----------------------


@pytest.mark.parametrize(
    ("text", "asks"),
    [
        ("Why do airlines overbook flights?", True),
        ("What does CI/CD stand for?", True),
        ("How does a stock split work?", True),
        ("Explain what a pull request is", True),
        ("What's the difference between a forecast and a nowcast?", True),
        ("Is it rude to reply-all to a company email?", True),
        ("How do I get from Oslo to Bergen?", False),  # a route: a tool's data
        ("Should I bring an umbrella to Paris tomorrow?", False),
        ("What is the weather in Rome?", False),
        ("Show me why-not-tickets in the backlog", False),  # "why" inside a word, not a question
    ],
)
def test_asks_knowledge(text: str, asks: bool) -> None:
    assert ENGLISH.asks_knowledge(text) is asks


async def test_a_knowledge_question_near_a_tool_is_left_to_the_model() -> None:
    s = await selector()
    assert (await s.select("weather forecast rain in Oslo")).tools == ("weather",)
    held = await s.select("why is the weather forecast for rain in Oslo so often wrong?")
    assert held.decision is Decision.AMBIGUOUS and held.candidates[0] == "weather"
    # Asked anywhere in the message, the concept holds for each clause: split at "and", the second one alone
    # reads as the tool's ask.
    held = await s.select("what's the difference between a storm watch and weather forecast rain in Oslo?")
    assert held.decision is Decision.AMBIGUOUS and "weather" in held.candidates


async def test_a_described_tool_over_its_own_reject_keeps_a_text_open_under_a_nearer_tool() -> None:
    ticket = common_pb2.ToolSpec(name="create_ticket", description="Open a new ticket in the issue tracker.")
    settings = SelectorSettings(choose=0.95, reject=0.9, margin=0.05, described_choose=0.95, described_reject=0.1)
    s = Selector(BagOfWords(), settings, no_tool_examples=NO_TOOL)
    await s.load([*SPECS, ticket])
    selection = await s.select("weather forecast rain Oslo sunny Paris tomorrow tracker")
    # The weather tool is nearest but under its reject; the described tool is over its own: the band decides.
    assert selection.scores["weather"] < 0.9 and 0.1 <= selection.scores["create_ticket"] < selection.scores["weather"]
    assert selection.decision is Decision.AMBIGUOUS and selection.candidates == ("create_ticket",)


# --- the opening verb against what a described tool's name says it does -----------------------


async def test_a_described_tool_whose_name_does_another_kind_loses_to_the_verb_and_a_follow_up_reads_its_own() -> None:
    tracker = [
        common_pb2.ToolSpec(name="create_ticket", description="A ticket in the tracker: title and project."),
        common_pb2.ToolSpec(name="search_tickets", description="Tickets in the tracker matching a text."),
        common_pb2.ToolSpec(name="update_ticket", description="A ticket's priority or assignee in the tracker."),
    ]
    first = "find tickets in the tracker about timeouts"
    follow_up = PlanInput("bump it to urgent", "auto", "", common_pb2.PRIORITY_P1, previous_message=first)
    scores = {}
    for weight in (0.0, 0.1):
        s = Selector(BagOfWords(), SelectorSettings(described_action=weight), no_tool_examples=NO_TOOL)
        await s.load(tracker)
        found = await s.select(first)
        ask = await scored_ask(s.index, tracker, follow_up, TurnCounters())
        assert ask.follow_up and ask.scored[-1].text == f"{first} bump it to urgent"
        cards = s.index.cards
        assert cards is not None
        scores[weight] = (found.scores, dict(zip(cards.tools, ask.scored[-1].per_tool.tolist(), strict=True)))
    (found_off, followed_off), (found_on, followed_on) = scores[0.0], scores[0.1]
    # "find" reads: the tool that creates loses 0.1, the one that reads keeps its score.
    assert found_on["create_ticket"] == pytest.approx(found_off["create_ticket"] - 0.1, abs=1e-3)
    assert found_on["search_tickets"] == pytest.approx(found_off["search_tickets"], abs=1e-3)
    # The follow-up's text opens with the message before it, but it does what its own verb says ("bump": update).
    assert followed_on["update_ticket"] == pytest.approx(followed_off["update_ticket"], abs=1e-3)
    assert followed_on["search_tickets"] == pytest.approx(followed_off["search_tickets"] - 0.1, abs=1e-3)


async def test_a_described_tool_near_a_text_whose_verb_contradicts_its_name_is_left_to_the_band() -> None:
    ticket = common_pb2.ToolSpec(name="create_ticket", description="open tickets tracker issue")
    settings = SelectorSettings(described_choose=0.3, described_reject=0.1, described_lead=0.1, margin=0.05)
    s = Selector(BagOfWords(), settings, no_tool_examples=NO_TOOL)
    await s.load([*SPECS, ticket])
    # The same words near the same card: a request that creates is the tool's; a question reads, and the tool's
    # name creates, so nearness alone does not decide it.
    assert (await s.select("open tickets tracker issue")).tools == ("create_ticket",)
    held = await s.select("are there open tickets tracker issue")
    assert held.decision is Decision.AMBIGUOUS and held.candidates[0] == "create_ticket"
