"""Built-in tools: safe arithmetic, units, clock, knowledge-base search, argument checks,
and each tool's examples (that they are many, and that their arguments really work) and summary."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from aiohttp import web

from services.tools.builtin import calculator, clock, default_tools, http_get, kb_search, places, unit_convert, units
from services.tools.builtin.http_get import Allowlist, check_url
from services.tools.registry import ToolDefinition, ToolError, ToolRegistry


@pytest.mark.parametrize(
    ("expression", "result"),
    [("23*47", 1081), ("2 + 3 * (4 - 1)", 11), ("sqrt(16) + 2**10", 1028), ("7 / 2", 3.5), ("-(3 % 2)", -1)],
)
def test_calculator_evaluates(expression: str, result: float) -> None:
    assert calculator.evaluate(expression) == result


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os')", "unknown function '__import__'"),
        ("__import__('os').system('true')", "only these functions may be called"),
        ("os", "unknown name 'os'"),
        ("().__class__.__bases__", "Attribute is not allowed"),
        ("open('/etc/passwd')", "unknown function 'open'"),
        ("'a' * 3", "Constant is not allowed"),
        ("[x for x in (1, 2)]", "ListComp is not allowed"),
        ("lambda: 1", "Lambda is not allowed"),
        ("9**9**9", "exponent 387420489 is too large"),
        ("1/0", "division by zero"),
        ("2 +", "not a valid expression"),
        ("sqrt(-1)", "sqrt: math domain error"),
    ],
)
def test_calculator_rejects(expression: str, message: str) -> None:
    with pytest.raises(ToolError) as err:
        calculator.evaluate(expression)
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("value", "src", "dst", "result"),
    [
        (10, "km", "mi", 6.2137119224),
        (212, "F", "celsius", 100),
        (1, "kg", "lb", 2.2046226218),
        (1, "gal", "l", 3.785411784),
    ],
)
def test_unit_convert(value: float, src: str, dst: str, result: float) -> None:
    assert unit_convert.convert(value, src, dst) == pytest.approx(result)


def test_unit_convert_rejects_mixed_dimensions() -> None:
    with pytest.raises(ToolError, match="cannot convert length"):
        unit_convert.convert(1, "km", "kg")
    with pytest.raises(ToolError, match="unknown unit 'parsec'"):
        unit_convert.convert(1, "parsec", "km")


async def test_clock_in_a_named_zone() -> None:
    fixed = dt.datetime(2026, 11, 29, 3, 4, 5, tzinfo=dt.UTC)
    tool = clock.make_tool(lambda: fixed)
    out = await tool.fn({"timezone": "Asia/Tokyo"})
    assert out["time"] == "12:04" and out["utc_offset"] == "+0900" and out["date"] == "2026-11-29"
    with pytest.raises(ToolError, match="unknown time zone 'Mars/Olympus'"):
        await tool.fn({"timezone": "Mars/Olympus"})


async def test_kb_search_finds_the_relevant_section() -> None:
    tool = kb_search.make_tool()
    out = await tool.fn({"query": "how big is a KV cache block on CPU?", "top_k": 2})
    assert out["results"][0]["title"] == "Prefix caching"
    assert "128 tokens" in out["results"][0]["text"]


def test_argument_errors_point_at_the_field() -> None:
    tool = unit_convert.TOOL
    problem = ToolRegistry.check_arguments(tool, {"quantity": 10, "to_unit": "mi"})
    assert problem is not None and problem.pointer == "/quantity"
    problem = ToolRegistry.check_arguments(tool, {"quantity": "1 km"})
    assert problem is not None and problem.pointer == "/to_unit"
    problem = ToolRegistry.check_arguments(tool, {"quantity": "1 km", "to_unit": "m", "x": 1})
    assert problem is not None and problem.pointer == "/x"
    assert ToolRegistry.check_arguments(tool, {"quantity": "1 km", "to_unit": "m"}) is None


def test_http_allowlist_rules() -> None:
    allow = Allowlist(["127.0.0.1", "docs.example.com", "10.1.0.0/16"])
    assert check_url("http://127.0.0.1:8080/x", allow)
    assert check_url("https://docs.example.com/a", allow)
    for url, why in [
        ("http://evil.example.com/", "not on the allowlist"),
        ("http://127.0.0.2/", "not on the allowlist"),
        ("http://[::1]/", "not on the allowlist"),
        ("ftp://docs.example.com/", "only http and https"),
        ("http://user:pw@docs.example.com/", "credentials"),
        ("http://2130706433/", "not on the allowlist"),
    ]:
        with pytest.raises(ToolError, match=why):
            check_url(url, allow)
    import ipaddress

    assert allow.address_allowed(ipaddress.ip_address("10.1.2.3"))
    assert allow.address_allowed(ipaddress.ip_address("93.184.216.34"))  # public
    assert not allow.address_allowed(ipaddress.ip_address("169.254.169.254"))
    assert not allow.address_allowed(ipaddress.ip_address("192.168.1.1"))


# --- calculator: everyday notation -------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "result"),
    [
        ("2^10", 1024),
        ("2 ^ 3 ^ 2", 512),  # right-associative, like **
        ("3 × 4 ÷ 2", 6),
        ("10 − 4", 6),
        ("15%*80", 12),
        ("15% * 80", 12),
        ("15% of 80", 12),
        ("15 % of 80", 12),
        ("60 - 20% of 60", 48),
        ("18% of $50", 9),  # a currency sign before an amount is dropped
        ("30% off 80", 56),  # a discount
        ("30 percent off of 80", 56),
        ("€ 12.50 * 4", 50),
        ("50%", 0.5),
        ("100/20%", 500),  # the percent binds to its number, not to what came before
        ("(15%)", 0.15),
        ("max(10%, 0.2)", 0.2),
        ("10% + 5", 5.1),
        ("7 % 3", 1),  # an operand after % makes it modulo
        ("7%3", 1),
        ("7 % (-3)", -2),
        ("1,234,567 + 1", 1234568),
        ("1,250*4", 5000),
        ("max(1,234)", 234),  # with a call, commas separate arguments
        ("min(1, 2,345)", 1),
        ("0.1 + 0.2", 0.3),  # float noise stays out of the answer
        ("0.07 * 100", 7),
    ],
)
def test_calculator_everyday_notation(expression: str, result: float) -> None:
    value = calculator.evaluate(expression)
    assert value == result
    assert type(value) is type(result)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("1,2345", "Tuple is not allowed"),  # not a thousands group: refused, not guessed
        ("15% off", "unknown name 'off'"),  # off what?
        ("2^9999", "exponent 9999 is too large"),
    ],
)
def test_calculator_everyday_notation_rejects(expression: str, message: str) -> None:
    with pytest.raises(ToolError, match=message):
        calculator.evaluate(expression)


async def test_calculator_summary_states_the_result() -> None:
    async def summary(expression: str) -> str:
        out = json.loads(json.dumps(await calculator.TOOL.fn({"expression": expression})))
        return calculator.summarize(out)

    assert await summary("23*47") == "23*47 = 1081."
    assert await summary(" 15% of 80 ") == "15% of 80 = 12."
    assert await summary("sqrt(2)") == "sqrt(2) = 1.414213562."
    assert await summary("1/3") == "1/3 = 0.3333333333."
    assert await summary("2.5*1.5") == "2.5*1.5 = 3.75."
    assert await summary("2**70") == "2**70 = 1180591620717411303424."
    assert await summary("1/8000000") == "1/8000000 = 1.25e-07."


# --- unit_convert: more units, more spellings ---------------------------------------------------


@pytest.mark.parametrize(
    ("value", "src", "dst", "result"),
    [
        (100, "degrees celsius", "degrees fahrenheit", 212),
        (100, "deg C", "deg F", 212),
        (0, "°C", "°F", 32),
        (32, "℉", "℃", 0),
        (50, "Fahrenheit", "C", 10),
        (0, "celsius", "kelvin", 273.15),
        (300, "°K", "c", 26.85),
        (-40, "F", "celsius", -40),
        (1, "stone", "lbs", 14),
        (10, "st", "kg", 63.5029318),
        (1, "nautical miles", "km", 1.852),
        (1, "metric ton", "kg", 1000),
        (2, "tonnes", "pounds", 4409.2452437),
        (1, "short ton", "lb", 2000),
        (1, "long tons", "lb", 2240),
        (1, "fl oz", "ml", 29.5735295625),
        (1, "fl. oz.", "mL", 29.5735295625),
        (1, "L", "fluid ounces", 33.8140227),
        (2, "cups", "pints", 1),
        (4, "quarts", "gallons", 1),
        (1, "imperial gallon", "litres", 4.54609),
        (1, "m3", "liters", 1000),
        (3, "teaspoons", "tbsp", 1),
        (100, "km/h", "mph", 62.1371192),
        (10, "m/s", "kph", 36),
        (60, "miles per hour", "kilometers per hour", 96.56064),
        (1, "knot", "km/h", 1.852),
        (1, "ft/s", "m/s", 0.3048),
        (1, "sq ft", "square meters", 0.09290304),
        (1, "acre", "sqft", 43560),
        (1, "km²", "ha", 100),
        (1, "square mile", "acres", 640),
        (1, "nm", "m", 1e-9),
        (1, "Kilometers", "METERS", 1000),
        (12, "inches", "feet", 1),
    ],
)
def test_unit_convert_more_units_and_spellings(value: float, src: str, dst: str, result: float) -> None:
    assert unit_convert.convert(value, src, dst) == pytest.approx(result)


def test_unit_convert_errors_say_what_to_do() -> None:
    with pytest.raises(ToolError) as err:
        unit_convert.convert(1, "parsec", "km")
    message = str(err.value)
    assert message.startswith("unknown unit 'parsec'; supported: mm, cm, m, km, in, ft, ")
    assert all(f" {u}," in message for u in ("lb", "st", "gal", "fl oz", "F", "km/h", "mph", "acre"))
    with pytest.raises(ToolError, match="unknown unit 'degrees'"):
        unit_convert.convert(1, "degrees", "F")
    with pytest.raises(ToolError, match=r"ambiguous unit 'tons'; say 't' \(metric ton\)"):
        unit_convert.convert(1, "tons", "kg")
    with pytest.raises(ToolError, match=r"cannot convert temperature \(C\) to length \(m\)"):
        unit_convert.convert(1, "C", "m")
    with pytest.raises(ToolError, match=r"cannot convert speed \(mph\) to area \(acre\)"):
        unit_convert.convert(1, "mph", "acre")
    with pytest.raises(ToolError, match="below absolute zero"):
        unit_convert.convert(-500, "F", "C")


async def test_unit_convert_output_keeps_tiny_results_and_drops_float_noise() -> None:
    out = await unit_convert.TOOL.fn({"quantity": "1 nm", "to_unit": "mi"})
    assert out["result"] == pytest.approx(6.21371192237e-13)
    out = await unit_convert.TOOL.fn({"quantity": "32 F", "to_unit": "C"})
    assert out["result"] == 0


async def test_unit_convert_summary_uses_the_units_as_written() -> None:
    async def summary(value: float, src: str, dst: str) -> str:
        args = {"quantity": f"{value} {src}", "to_unit": dst}
        return unit_convert.summarize(json.loads(json.dumps(await unit_convert.TOOL.fn(args))))

    assert await summary(5, "kg", "lb") == "5 kg = 11.0231 lb."
    assert await summary(100, "degrees celsius", "fahrenheit") == "100 degrees celsius = 212 fahrenheit."
    assert await summary(98.6, "F", "C") == "98.6 F = 37 C."
    assert await summary(10, "km", "miles") == "10 km = 6.21371 miles."
    assert await summary(1, "sq ft", "m2") == "1 sq ft = 0.092903 m2."
    assert await summary(1, "nm", "mi") == "1 nm = 6.21371e-13 mi."


@pytest.mark.parametrize(
    ("quantity", "value", "unit"),
    [
        ("3 gallons", 3.0, "gallons"),
        ("26.2 miles", 26.2, "miles"),
        ("-40 celsius", -40.0, "celsius"),
        ("30 degrees Celsius", 30.0, "degrees Celsius"),
        ("98.6°F", 98.6, "°F"),
        ("5kg", 5.0, "kg"),
        ("1,500  feet", 1500.0, "feet"),
        (".5 L", 0.5, "L"),
        ("a gallon", 1.0, "gallon"),
        ("two cups", 2.0, "cups"),
    ],
)
def test_quantity_is_parsed_as_the_user_wrote_it(quantity: str, value: float, unit: str) -> None:
    assert unit_convert.parse_quantity(quantity) == (value, unit)


@pytest.mark.parametrize(
    ("quantity", "problem"),
    [("gallons", "has no amount"), ("3", "has no unit"), ("-", "has no amount"), ("- a gallon", "has no amount")],
)
def test_quantity_without_amount_or_unit_is_a_clear_tool_error(quantity: str, problem: str) -> None:
    with pytest.raises(ToolError, match=problem):
        unit_convert.parse_quantity(quantity)


async def test_unit_convert_relays_an_unknown_unit_as_the_user_wrote_it() -> None:
    with pytest.raises(ToolError, match="unknown unit 'furlongs'; supported: mm, cm"):
        await unit_convert.TOOL.fn({"quantity": "4 furlongs", "to_unit": "meters"})


# --- clock --------------------------------------------------------------------------------------


async def test_clock_resolves_cities_and_case_and_says_the_zone_used() -> None:
    fixed = dt.datetime(2026, 11, 30, 5, 3, tzinfo=dt.UTC)
    tool = clock.make_tool(lambda: fixed)
    for written, zone in [
        ("Tokyo", "Asia/Tokyo"),
        ("new york", "America/New_York"),
        ("asia/tokyo", "Asia/Tokyo"),
        ("utc", "UTC"),
        ("Buenos Aires", "America/Argentina/Buenos_Aires"),
    ]:
        assert (await tool.fn({"timezone": written}))["timezone"] == zone
    with pytest.raises(ToolError, match="unknown time zone 'Eastern'"):
        await tool.fn({"timezone": "Eastern"})  # a legacy alias's city part is not a city


async def test_clock_summary() -> None:
    fixed = dt.datetime(2026, 11, 30, 5, 3, tzinfo=dt.UTC)
    tool = clock.make_tool(lambda: fixed)
    out = json.loads(json.dumps(await tool.fn({"timezone": "Asia/Tokyo"})))
    assert clock.summarize(out) == "In Asia/Tokyo it is 14:03 on Monday, 2026-11-30."
    out = json.loads(json.dumps(await tool.fn({"timezone": "America/New_York"})))
    assert clock.summarize(out) == "In America/New_York it is 00:03 on Monday, 2026-11-30."


# --- kb_search ----------------------------------------------------------------------------------


async def test_kb_search_summary_quotes_the_sentence_that_answers() -> None:
    tool = kb_search.make_tool()
    out = json.loads(json.dumps(await tool.fn({"query": "KV cache block size CPU"})))
    assert kb_search.summarize(out) == (
        'The AgentMesh docs say, under "Prefix caching": vLLM caches the KV entries of prompt prefixes in whole'
        " blocks. On CPU a block is 128 tokens, so a shared system prompt shorter than 128 tokens is never a"
        " cache hit."
    )
    out = json.loads(json.dumps(await tool.fn({"query": "tool executor circuit breaker"})))
    summary = kb_search.summarize(out)
    assert summary.startswith('The AgentMesh docs say, under "Tool executor": ')
    assert "Each tool has a circuit breaker and a bulkhead" in summary
    # One sentence sets the terms, the next answers: both share the query's words, and both are stated.
    out = json.loads(json.dumps(await tool.fn({"query": "What happens to P2 requests under load"})))
    assert "P2 for batch work." in kb_search.summarize(out)
    assert "sheds P2 first with RESOURCE_EXHAUSTED" in kb_search.summarize(out)
    out = await tool.fn({"query": "zzzz quux"})
    assert out["results"] == [] and kb_search.summarize(out) == ""


# --- http_get -----------------------------------------------------------------------------------


@pytest.fixture
async def loopback_site() -> AsyncIterator[str]:
    async def page(request: web.Request) -> web.Response:
        return web.Response(text="all systems go")

    async def gone(request: web.Request) -> web.Response:
        return web.Response(status=410, text="gone")

    async def moved(request: web.Request) -> web.Response:
        raise web.HTTPFound("/status")

    app = web.Application()
    app.add_routes([web.get("/status", page), web.get("/gone", gone), web.get("/moved", moved)])
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_http_get_summary(loopback_site: str) -> None:
    tool = http_get.make_tool(["127.0.0.1"])
    out = json.loads(json.dumps(await tool.fn({"url": f"{loopback_site}/status"})))
    assert http_get.summarize(out) == f"GET {loopback_site}/status returned HTTP 200."
    out = json.loads(json.dumps(await tool.fn({"url": f"{loopback_site}/gone"})))
    assert http_get.summarize(out) == f"GET {loopback_site}/gone returned HTTP 410."
    out = json.loads(json.dumps(await tool.fn({"url": f"{loopback_site}/moved"})))
    assert http_get.summarize(out) == f"GET {loopback_site}/status returned HTTP 200."  # where it ended up


# --- every tool: examples and summaries ---------------------------------------------------------

TOOLS = default_tools()
SUMMARIZERS = {
    "calculator": calculator.summarize,
    "clock": clock.summarize,
    "unit_convert": unit_convert.summarize,
    "kb_search": kb_search.summarize,
    "http_get": http_get.summarize,
}
#: kb_search examples on topics the shipped knowledge base does not cover yet; asserted to find
#: nothing, so this list fails (and can be emptied) when the docs grow to cover them.
KB_GAPS = {"deploy kubernetes"}


def test_every_builtin_tool_says_how_people_ask_for_it() -> None:
    assert {t.name for t in TOOLS} == set(SUMMARIZERS)
    texts: list[str] = []
    for tool in TOOLS:
        with_arguments = [e for e in tool.examples if e.arguments is not None]
        assert len(tool.examples) >= 15, tool.name
        assert len(tool.negative_examples) >= 8, tool.name
        assert len(with_arguments) >= 0.8 * len(tool.examples), tool.name
        own = [e.text for e in tool.examples]
        assert len(set(own)) == len(own), f"{tool.name}: duplicate example"
        assert not set(own) & set(tool.negative_examples), f"{tool.name}: an example is also a near miss"
        assert tool.summarize is SUMMARIZERS[tool.name]
        texts += own
    assert len(set(texts)) == len(texts), "one request is an example of two tools"


def _by_name(name: str) -> ToolDefinition:
    return next(t for t in TOOLS if t.name == name)


@pytest.mark.parametrize("name", ["calculator", "clock", "unit_convert", "kb_search"])
async def test_worked_examples_run_and_summarize(name: str) -> None:
    tool = _by_name(name)
    for example in tool.examples:
        if example.arguments is None:
            continue
        assert ToolRegistry.check_arguments(tool, example.arguments) is None
        out = json.loads(json.dumps(await tool.fn(example.arguments)))
        summary = SUMMARIZERS[name](out)
        if name == "kb_search":
            query = example.arguments["query"]
            assert (summary == "") is (query in KB_GAPS), f"{query!r} should find a section of the docs"
        else:
            assert summary.endswith(".") and "\n" not in summary, (example.text, summary)


def test_http_get_examples_are_fetchable_urls() -> None:
    """Offline, the most the real tool can check: each URL passes the SSRF rules once its host is allowed."""
    for example in _by_name("http_get").examples:
        assert example.arguments is not None
        url = example.arguments["url"]
        assert check_url(url, Allowlist([urlsplit(url).hostname or ""])) == url


@pytest.mark.parametrize("name", list(SUMMARIZERS))
@pytest.mark.parametrize(
    "output",
    [None, "text", 42, [], {}, {"result": None}, {"results": [{}]}, {"expression": 1, "result": "x"}],
)
def test_summarizers_are_total(name: str, output: Any) -> None:
    assert SUMMARIZERS[name](output) == ""


# --- everyday wording, places, whole-question search --------------------------------------------


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2 to the power of 10", 1024),
        ("What is 2 to the power of 10?", 1024),
        ("half of 10", 5),
        ("15 percent of 80", 12),
        ("What's the square root of 144?", 12),
        ("144 divided by 12", 12),
        ("3 squared plus 4 squared", 25),
        ("subtract 19 from 100", 81),
        ("add 6 to 144", 150),
        ("a third of 90", 30),
        ("7 to the 3rd power", 343),
        ("multiply 56 by 12", 672),
        ("5 x 8", 40),
        ("Please calculate 9876 - 1234", 8642),
        ("half of ten", 5),
        ("1/4 of 200", 50),
    ],
)
def test_calculator_reads_everyday_wording(expression: str, value: float) -> None:
    assert calculator.evaluate(expression) == value


def test_calculator_wording_never_guesses_an_unknown_word() -> None:
    with pytest.raises(ToolError, match=r"not a valid expression|unknown name"):
        calculator.evaluate("add 6 to that result")


@pytest.mark.parametrize(
    ("place", "zone"),
    [
        ("India", "Asia/Kolkata"),
        ("san francisco", "America/Los_Angeles"),
        ("Mexico City", "America/Mexico_City"),
        ("São Paulo", "America/Sao_Paulo"),
        ("Buenos Aires", "America/Argentina/Buenos_Aires"),
        ("PST", "America/Los_Angeles"),
        ("Mexico/Mexico", "America/Mexico_City"),  # a made-up zone whose city part is a place
    ],
)
def test_clock_resolves_what_people_call_a_place(place: str, zone: str) -> None:
    assert clock.resolve_zone(place).key == zone


def test_the_clock_copy_pattern_knows_places_and_not_everyday_words() -> None:
    pattern = places.place_pattern()
    assert all(re.search(pattern, p) for p in ("Tokyo", "new york", "new_york", "Japan", "UTC"))
    assert not any(re.search(pattern, w) for w in ("time", "center", "Easter", "right now", "Tokyo time"))


@pytest.mark.parametrize(
    ("question", "title"),
    [
        ("Which port does the AgentMesh gateway listen on?", "Ports"),
        ("How does AgentMesh cope when it's overloaded?", "Priorities and shedding"),
        ("What tools does AgentMesh come with?", "Tools"),
        ("How does AgentMesh make use of prefix caching?", "Prefix caching"),
        ("Tell me about AgentMesh", "AgentMesh overview"),  # the corpus's own name is all the query has
        # "how does … work" is a question's filler, not the batch "work" of the priorities section.
        ("How does authentication work at the AgentMesh gateway?", "Authentication and tenants"),
        # The tool's own examples, which the first corpus (one overview file) could not answer.
        ("What does the AgentMesh gateway do?", "Gateway"),  # was "Ports": the shortest section saying "gateway"
        ("How do sessions work in AgentMesh?", "Sessions"),
        ("how do I deploy agentmesh on kubernetes", "Kubernetes and Envoy"),
        ("Which metrics does AgentMesh export, and where?", "Metrics and tracing"),
        ("How does AgentMesh pick an inference replica?", "Replica picking"),
        # "router's" leaves an "s" that is no term ("the tool's timeout" elsewhere would rank it).
        ("Could you explain the router's responsibilities? What runs the agent loop?", "Router and the agent turn"),
    ],
)
async def test_kb_search_ranks_a_whole_question_by_its_telling_words(question: str, title: str) -> None:
    out = await kb_search.make_tool().fn({"query": question})
    assert out["results"][0]["title"] == title


def test_kb_search_reaches_a_term_by_prefix_and_names_a_common_question_by_title(tmp_path: Path) -> None:
    (tmp_path / "docs.md").write_text(
        "# Edge\n\nThe edge checks API-key auth for every service call.\n\n"
        "# Tools\n\nBuilt-in tools: a calculator and a clock.\n\n"
        "# Tool executor\n\nThe tool executor runs each tool call of a tool under the tool's timeout.\n\n"
        "# Ports\n\nThe service listens on port 50051; a tool call goes to port 50053.\n",
        encoding="utf-8",
    )
    index = kb_search.Bm25Index(kb_search.load_sections(tmp_path))
    # "authenticate" reaches the docs' "auth" (4 letters at least): a term the index lacks, by prefix.
    assert index.search("How do clients authenticate?", 1)[0][1].title == "Edge"
    # "tool" is in most sections, so it ranks nothing by its count: the section titled with it answers.
    assert index.search("What tools are there?", 1)[0][1].title == "Tools"


@pytest.mark.parametrize(
    ("quantity", "target", "result"),
    [
        ("2 hours", "minutes", 120),
        ("45 minutes", "h", 0.75),
        ("1 week", "days", 7),
        ("a liter", "ounces", 33.8140227018),  # between a volume and ounces, the ounces are fluid ounces
        ("8 oz", "grams", 226.796185),  # ounces of a mass stay a mass
        ("6 feet tall", "cm", 182.88),  # the unit is the first word when only that is one
    ],
)
async def test_unit_convert_time_fluid_ounces_and_a_trailing_word(quantity: str, target: str, result: float) -> None:
    out = await unit_convert.TOOL.fn({"quantity": quantity, "to_unit": target})
    assert out["result"] == pytest.approx(result)


async def test_a_year_is_refused_as_ambiguous() -> None:
    with pytest.raises(ToolError, match="ambiguous unit 'year'"):
        await unit_convert.TOOL.fn({"quantity": "1 year", "to_unit": "days"})


def test_the_target_unit_copy_pattern_knows_units_and_not_words() -> None:
    pattern = units.unit_pattern()
    assert all(re.search(pattern, u) for u in ("pounds", "Fahrenheit", "°C", "degrees Celsius", "km/h", "fluid ounces"))
    assert not any(re.search(pattern, w) for w in ("Convert", "What's", "meters to feet", "parsecs", "how"))


@pytest.mark.parametrize(
    ("span", "copied"),
    [
        ("7 times 8 minus 5", True),
        ("2 to the power of 10", True),
        ("Take 25 away from 300", True),
        ("square root of 144", True),
        ("9 squared minus 1", True),
        ("15% of 80", True),
        ("3 hours", False),  # a quantity, not arithmetic
        ("twelve times eleven", True),  # numbers in words
        ("seconds are in 4 hours", True),  # a count of time units
        ("hours are there in a 365-day year", True),
        ("minutes in a week", True),
        ("hours in minutes", False),  # "3 hours in minutes" is a conversion, not a count
        ("days in a month", False),  # no fixed count: the model composes, or answers
        ("percent of 60 is 45", True),
        ("45 is what percent of 60", True),
        ("average of 82, 90 and 77", True),
        ("4.50", False),  # a lone number is no expression
        ("twenty-five", False),  # nor is one in words: its hyphen is no minus
        ("(12 + 8) * 5", True),  # parentheses, which the router's spans keep when they balance
        ("(3+4)*(5-2)", True),
        ("twenty - five", True),
        ("thirty-two times forty-one", True),
        ("5 by 8", False),
        ("a fifth of 1000", True),  # a fraction by its ordinal
        ("two thirds of ninety", True),
        ("the fifth of November", False),  # an ordinal of no number
    ],
)
def test_the_calculator_copies_only_spans_that_are_arithmetic(span: str, copied: bool) -> None:
    from services.tools.builtin.math_words import arithmetic_pattern

    assert (re.search(arithmetic_pattern(), span) is not None) is copied
    if copied:
        calculator.evaluate(span)  # every span it copies is one the tool reads


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("twelve times eleven", 132),
        ("three hundred and five plus twenty-five", 330),
        ("one third of ninety", 30),
        ("a fifth of 1000", 200),
        ("two thirds of 90", 60),
        ("3 quarters of 200", 150),
        ("an eighth of 64", 8),
        ("a tenth of 450", 45),
        ("seconds are in 4 hours", 14400),
        ("minutes in a week", 10080),
        ("hours are there in a 365-day year", 8760),
        ("seconds in three hours", 10800),
        ("weeks in a year", 52),  # as people count them
        ("months in 2 years", 24),
        ("What percent of 60 is 45", 75),
        ("45 is what percent of 60", 75),
        ("45 out of 60 as a percentage", 75),
        ("average of 82, 90 and 77", 83),
        ("the mean of 2, 4, 6, and 8", 5),
        ("avg(82, 90, 77)", 83),
    ],
)
def test_calculator_reads_worded_numbers_time_counts_percentages_and_averages(expression: str, value: float) -> None:
    assert calculator.evaluate(expression) == pytest.approx(value)


def test_an_average_of_nothing_and_a_count_with_no_fixed_value_are_clear_errors() -> None:
    with pytest.raises(ToolError, match="avg: needs at least one number"):
        calculator.evaluate("avg()")
    with pytest.raises(ToolError, match="not a valid expression"):
        calculator.evaluate("days in a month")


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("twelve times eleven", [12, 11]),
        ("twenty-five and three hundred and five", [25, 305]),
        ("two thousand five hundred", [2500]),
        ("two three", [2, 3]),  # not one number
        ("fifteen hundred", [1500]),
        ("someone, anyone, tone", []),  # whole words only
    ],
)
def test_numbers_written_in_words_are_read_whole(text: str, found: list[int]) -> None:
    from services.runtime.numbers import worded_numbers, words_to_digits

    assert [v for _, _, v in worded_numbers(text)] == found
    assert words_to_digits("what is twelve times eleven?") == "what is 12 times 11?"


def test_kb_stems_give_every_form_of_a_word_one_spelling() -> None:
    forms = [("retries", "retried", "retry"), ("caches", "cached", "caching", "cache"), ("services", "service")]
    for group in forms:
        assert len({kb_search.stem(w) for w in group}) == 1, group
