"""Planning for any tool: description-only tools, the judge chain from config, a router that names no tool."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import cast

import pytest

from agentmesh.common.v1 import common_pb2
from services.router.planning import JUDGE_NAMES, Planner, PlanningSettings, SelectorSettings
from services.router.planning.candidates import CardIndex
from services.router.planning.cards import name_words, tool_card
from services.router.planning.copying import copy_constrained
from services.router.planning.embedding import MiniLmEmbedder
from services.router.planning.shots import card_calls
from services.router.replicas.generation import Generator
from services.router.turn.progress import TurnCounters
from services.tools.builtin import default_tools
from services.tools.convert import spec_to_proto
from tests.support.planning import BagOfWords, Scripted, turn

ROUTER = Path(__file__).resolve().parents[2] / "services" / "router"


def described(name: str, description: str, properties: dict[str, dict[str, object]]) -> common_pb2.ToolSpec:
    """A tool as an MCP server or an OpenAI ``tools`` list brings it: a name, a description and a schema."""
    schema = {"type": "object", "properties": properties, "required": [next(iter(properties))]}
    return common_pb2.ToolSpec(name=name, description=description, parameters_json_schema=json.dumps(schema))


FORECAST = described(
    "weather_forecast",
    "Daily forecast for the coming days: high/low temperature, chance of precipitation and wind.",
    {"city": {"type": "string", "description": "City to forecast for, e.g. 'Berlin'"}, "days": {"type": "integer"}},
)
TICKET = described(
    "create_ticket",
    "Open a new ticket in the issue tracker with a title, a description and a priority.",
    {"title": {"type": "string"}, "priority": {"type": "string", "enum": ["low", "medium", "high"]}},
)


def test_a_described_tools_card_is_its_name_description_and_parameters() -> None:
    card = tool_card(FORECAST)
    assert card.described and card.negatives == ()
    assert card.positives[0] == FORECAST.description and "weather forecast" in card.positives
    assert "City to forecast for" in card.positives[-1]
    assert name_words("calendar__listEvents") == "calendar list events"
    assert not tool_card(spec_to_proto(default_tools()[0])).described  # a built-in brings examples


def test_a_described_tool_gets_a_worked_call_built_from_its_schema() -> None:
    [(request, arguments)] = card_calls(FORECAST)
    assert arguments == {"city": "Berlin"}  # the quoted example value
    assert request == "Daily forecast for the coming days Berlin"  # the description's first clause and the values
    [(_, ticket)] = card_calls(TICKET)
    assert ticket == {"title": "title", "priority": "low"}  # a required value of its type, an enum's first


def test_a_described_tools_free_strings_are_copied_from_the_conversation() -> None:
    schema = FORECAST.parameters_json_schema
    message = "Will it rain in Lisbon this weekend?"
    narrowed = json.loads(copy_constrained(schema, message, "", implied=True))
    options = narrowed["properties"]["city"]["enum"]
    # The property's own name is no option unless someone said it; the city and the whole ask are.
    assert "Lisbon" in options and "city" not in options and "Will it rain in Lisbon this weekend" in options
    assert "days" not in narrowed["properties"]  # optional, and no amount is written: its default stands
    ticket = json.loads(copy_constrained(TICKET.parameters_json_schema, "Open a ticket: login fails", implied=True))
    assert ticket["properties"]["priority"]["enum"] == ["low", "medium", "high"]  # its own rule stays
    asked = json.loads(
        copy_constrained(TICKET.parameters_json_schema, "how do I write a good bug report?", implied=True)
    )
    assert "I" not in asked["properties"]["title"]["enum"] and "bug report" in asked["properties"]["title"]["enum"]
    assert copy_constrained(schema, message) == schema  # a tool with examples of its own: untouched
    hinted = json.dumps({"type": "object", "properties": {"q": {"type": "string", "x-agentmesh-copy": "message"}}})
    assert json.loads(copy_constrained(hinted, message, implied=True))["properties"]["q"]["enum"] == [
        "Will it rain in Lisbon this weekend"
    ]  # a schema with hints is read by its hints


@pytest.fixture(scope="module")
def embedder() -> MiniLmEmbedder:
    return MiniLmEmbedder()


async def test_a_described_tool_is_chosen_for_a_paraphrase_of_its_description_and_not_for_a_near_miss(
    embedder: MiniLmEmbedder,
) -> None:
    specs = [*(spec_to_proto(t) for t in default_tools()), FORECAST, TICKET]
    # Only the two fills generate: every choice here is the judges' before the LLM's.
    gen = Scripted('{"city":"Lisbon"}', '{"title":"the login page returns an error"}')
    planner = Planner(cast(Generator, gen), PlanningSettings(judges=("similarity", "schema", "classifier")), embedder)
    await planner.prepare(specs)

    async def planned(message: str) -> list[str]:
        return [c.name for c in (await planner.plan(specs, turn(message), TurnCounters())).calls]

    assert await planned("What's the forecast for Lisbon for the next few days?") == ["weather_forecast"]
    assert await planned("Please open a ticket: the login page returns an error") == ["create_ticket"]
    for near_miss in ("Write a short poem about the rain.", "What causes thunderstorms?"):
        assert await planned(near_miss) == [], near_miss
    assert len(gen.asked) == 2 and all(json.loads(a.json_schema)["type"] == "object" for a in gen.asked)


async def test_a_no_tool_example_a_loaded_tool_covers_leaves_the_no_tool_class() -> None:
    population = common_pb2.ToolSpec(
        name="city_population",
        description="population of a city",
        examples=[common_pb2.ToolExample(text="population of tokyo")],
    )
    no_tool = ["what is the population of tokyo", "write a poem about the sea"]
    index = CardIndex(BagOfWords(), SelectorSettings(choose=0.5), no_tool)
    await index.load([population])
    assert index.no_tool_examples == ["write a poem about the sea"]
    assert index.cards is not None and index.cards.covered == ("what is the population of tokyo",)
    await index.load([spec_to_proto(default_tools()[0])])  # a tool list that does not cover it: it is back
    assert index.no_tool_examples == no_tool


async def test_a_described_tool_covers_a_no_tool_example_on_the_scale_the_judges_read() -> None:
    # A described tool's score is its cosine plus the words it shares with the card: coverage reads the same
    # sum, so an ask the judges would choose the tool for is not also held against it as "no tool".
    ask = "the chance of wind and a forecast for the coming weekend"
    covered = []
    for words in (0.0, 0.05):
        settings = SelectorSettings(described_choose=0.73, described_words=words)
        index = CardIndex(BagOfWords(), settings, ["write a poem about the sea"], capability_asks=[ask])
        await index.load([FORECAST, TICKET])
        [scored] = await index.score([ask])
        assert bool(scored.per_tool[0] >= 0.73) is (words > 0)  # the cosine alone is under the threshold
        assert index.cards is not None
        covered.append(index.cards.covered)
    assert covered == [(), (ask,)]


async def test_a_changed_tool_list_embeds_only_what_changed() -> None:
    embedder = BagOfWords()
    index = CardIndex(embedder, no_tool_examples=["hello there"])
    await index.load([FORECAST])
    first = sum(len(c) for c in embedder.calls)
    await index.load([FORECAST, TICKET])
    added = embedder.calls[-1]
    assert set(added) == set(tool_card(TICKET).positives)  # the forecast's cards and the no-tool ones are kept
    assert first > len(added)


@pytest.mark.parametrize(
    "chain",
    [
        ("similarity", "schema", "classifier", "whether", "likelihood", "llm"),
        ("similarity", "classifier", "llm"),
        ("llm",),
        ("similarity",),
    ],
)
def test_the_judge_chain_is_the_configured_order(chain: tuple[str, ...]) -> None:
    settings = PlanningSettings(judges=chain)
    planner = Planner(cast(Generator, Scripted()), settings, BagOfWords())
    assert tuple(planner.judges) == chain
    assert planner.replans == (chain == ("llm",))  # only a chain that embeds nothing chooses again after tools


async def test_a_chain_without_the_llm_judge_leaves_the_band_to_no_tool() -> None:
    gen = Scripted()  # any generation would fail: nothing is scripted
    specs = [FORECAST, TICKET]
    planner = Planner(
        cast(Generator, gen),
        PlanningSettings(judges=("similarity",), selector=SelectorSettings(described_choose=0.99)),
        BagOfWords(),
    )
    plan = await planner.plan(specs, turn("forecast for Oslo"), TurnCounters())
    assert plan.calls == [] and gen.asked == []


def test_every_judge_name_is_buildable_and_a_bad_chain_is_refused() -> None:
    assert set(JUDGE_NAMES) == {"similarity", "schema", "classifier", "whether", "likelihood", "llm"}
    with pytest.raises(ValueError, match="must come first"):
        PlanningSettings(judges=("schema", "similarity"))
    with pytest.raises(ValueError, match="similarity must run"):
        PlanningSettings(judges=("likelihood", "llm"))
    with pytest.raises(ValueError, match="similarity must run"):
        PlanningSettings(judges=("whether", "llm"))


def test_the_router_names_no_tool_and_holds_no_phrase_rules() -> None:
    builtins = [t.name for t in default_tools()]
    named = re.compile(r"\b(" + "|".join(map(re.escape, builtins)) + r")\b", re.IGNORECASE)
    found = []
    phrase_rule = re.compile(r"\b[a-z]{2,}\|[a-z]{2,}\|[a-z]{2,}")  # an alternation of words: a language rule
    for path in sorted(ROUTER.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        found += [
            f"{path.relative_to(ROUTER)}:{source.count(chr(10), 0, m.start()) + 1}" for m in named.finditer(source)
        ]
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and phrase_rule.search(node.value):
                found.append(f"{path.relative_to(ROUTER)}:{node.lineno} (a word alternation)")
    assert found == []


def test_the_router_reads_as_its_parts_and_no_file_is_over_300_lines() -> None:
    """The folder shows the router's parts (one subpackage each) and each module stays readable in one sitting."""
    parts = {p.name for p in ROUTER.iterdir() if (p / "__init__.py").is_file()}
    assert {"serving", "turn", "planning", "tools", "sessions", "replicas"} <= parts
    top = sorted(p.name for p in ROUTER.glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "build.py", "config.py", "main.py", "metrics.py"]
    long = [
        f"{p.relative_to(ROUTER)}: {n}" for p in ROUTER.rglob("*.py") if (n := len(p.read_text().splitlines())) > 300
    ]
    assert long == []
