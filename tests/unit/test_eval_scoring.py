"""The evaluation harness without a mesh: scoring, summaries, the report, the case files, and the runner on a fake."""

from __future__ import annotations

import ast
import asyncio
import json
import random
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import numpy as np
import pytest

import services
from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from evals.__main__ import parse_args
from evals.arguments import check_arguments, normalise_unit, normalise_url
from evals.cases import (
    BLIND_DIRS,
    CASES_DIR,
    CATEGORIES,
    PROBES_DIR,
    SPLITS,
    AnswerSpec,
    Case,
    CaseError,
    TurnSpec,
    load_cases,
    parse_case,
)
from evals.records import ToolCall, TurnRecord
from evals.report import RunInfo, render_markdown
from evals.runner import progress_line, run_eval
from evals.scoring import check_answer, contains_number, extract_numbers, percentile, score_turn, tool_set_match
from evals.summary import Report, summarise
from services.tools.builtin.unit_convert import convert
from services.tools.registry import ToolError

# ------------------------------------------------------------------------------------------- numbers


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("23*47 is 1,081.", [23, 47, 1081]),
        ("5 kg is about 11.02 pounds", [5, 11.02]),
        ("9876 - 1234 = 8642", [9876, 1234, 8642]),
        ("9876-1234 is 8642", [9876, 1234, 8642]),
        ("It is -5 degrees, or \u22125", [-5, -5]),
        ("1,234,567.5 and 45, 78", [1234567.5, 45, 78]),
        ("no numbers here", []),
    ],
)
def test_extract_numbers_normalises_thousands_and_signs(text: str, numbers: list[float]) -> None:
    assert extract_numbers(text) == numbers


def test_contains_number_allows_rounding_within_a_tenth_of_a_percent() -> None:
    assert contains_number("about 11.02 lb", 11.0231)
    assert contains_number("23*47 = 1,081", 1081)
    assert contains_number("it is 37 °C", 37.0000000001)
    assert contains_number("zero: 0", 0)
    assert not contains_number("about 11 lb", 11.0231)  # 0.2 % off
    assert not contains_number("108", 1081)
    assert not contains_number("1081", -1081)
    assert not contains_number("", 1)


# ----------------------------------------------------------------------------------------- arguments


def test_calculator_arguments_compare_the_value_not_the_text() -> None:
    assert check_arguments("calculator", {"result": 1081}, {"expression": "23*47"}) is None
    assert check_arguments("calculator", {"result": 1081}, {"expression": "47 * 23"}) is None
    assert check_arguments("calculator", {"result": 12}, {"expression": "15/100*80"}) is None
    assert check_arguments("calculator", {"result": 1081}, {"expression": "23*46"}) is not None
    assert check_arguments("calculator", {"result": 1081}, {"expression": "x"}) is not None
    assert check_arguments("calculator", {"result": 1081}, {"expression": 1081}) is not None
    assert check_arguments("calculator", {"result": 1081}, {}) is not None
    assert check_arguments("calculator", {"result": 1081}, None) is not None


def test_unit_arguments_compare_after_the_tools_alias_table() -> None:
    expected = {"value": 5, "from_unit": "kg", "to_unit": "lb"}
    assert (
        check_arguments("unit_convert", expected, {"value": 5, "from_unit": "kilograms", "to_unit": "pounds"}) is None
    )
    assert check_arguments("unit_convert", expected, {"value": 5.0, "from_unit": "KG", "to_unit": "lbs"}) is None
    assert check_arguments("unit_convert", expected, {"value": 5, "from_unit": "kg", "to_unit": "oz"}) is not None
    assert check_arguments("unit_convert", expected, {"value": 50, "from_unit": "kg", "to_unit": "lb"}) is not None
    assert check_arguments("unit_convert", expected, {"value": "5", "from_unit": "kg", "to_unit": "lb"}) is not None
    assert check_arguments("unit_convert", expected, {"value": True, "from_unit": "kg", "to_unit": "lb"}) is not None
    assert check_arguments("unit_convert", expected, {"value": 5, "from_unit": "lb", "to_unit": "kg"}) is not None
    temperature = {"value": 30, "from_unit": "celsius", "to_unit": "fahrenheit"}
    assert check_arguments("unit_convert", temperature, {"value": 30, "from_unit": "°C", "to_unit": "F"}) is None
    # A unit the tool does not know can still be expected; plural and case do not matter.
    quantity = {"quantity": "5 kilograms", "to_unit": "pounds"}
    assert check_arguments("unit_convert", expected, quantity) is None
    assert check_arguments("unit_convert", expected, {"quantity": "5 pounds", "to_unit": "kg"}) is not None
    assert "does not parse" in str(check_arguments("unit_convert", expected, {"quantity": "kg", "to_unit": "lb"}))
    unknown = {"value": 4, "from_unit": "furlong", "to_unit": "m"}
    assert check_arguments("unit_convert", unknown, {"value": 4, "from_unit": "Furlongs", "to_unit": "meters"}) is None
    alternatives = {"value": 4, "from_unit": ["furlong", "fur"], "to_unit": "m"}
    assert check_arguments("unit_convert", alternatives, {"value": 4, "from_unit": "fur", "to_unit": "m"}) is None


def test_normalise_unit_uses_the_tool_and_keeps_unknown_units_plain() -> None:
    assert normalise_unit("kilograms") == normalise_unit("kg")
    assert normalise_unit(" Pounds ") == normalise_unit("lb")
    assert normalise_unit("Light  Years") == "light year"


def test_clock_arguments_compare_the_zone_the_tool_would_use() -> None:
    assert check_arguments("clock", {"timezone": "Asia/Tokyo"}, {"timezone": "Asia/Tokyo"}) is None
    assert check_arguments("clock", {"timezone": "Asia/Tokyo"}, {"timezone": "asia/tokyo"}) is None
    assert check_arguments("clock", {"timezone": "Asia/Tokyo"}, {"timezone": "Asia/Seoul"}) is not None
    assert check_arguments("clock", {"timezone": "Asia/Tokyo"}, {"timezone": "Nowhere/Atlantis"}) is not None
    assert check_arguments("clock", {"timezone": "Asia/Tokyo"}, {}) is not None
    mumbai = {"timezone": ["Asia/Kolkata", "Asia/Calcutta"]}
    assert check_arguments("clock", mumbai, {"timezone": "Asia/Calcutta"}) is None
    assert check_arguments("clock", mumbai, {"timezone": "Asia/Karachi"}) is not None


def test_kb_search_query_must_share_a_keyword() -> None:
    expected = {"keywords": ["port", "gateway"]}
    assert check_arguments("kb_search", expected, {"query": "AgentMesh gateway"}) is None
    assert check_arguments("kb_search", expected, {"query": "which ports"}) is None  # keyword as a prefix
    assert check_arguments("kb_search", expected, {"query": "weather tomorrow"}) is not None
    assert check_arguments("kb_search", expected, {"query": "  "}) is not None
    assert check_arguments("kb_search", expected, {"query": "support"}) is not None  # not a prefix of a word


def test_http_get_urls_compare_equal_up_to_case_and_a_bare_slash() -> None:
    assert normalise_url("HTTPS://Example.com/") == normalise_url("https://example.com")
    assert check_arguments("http_get", {"url": "https://example.com"}, {"url": "https://example.com/"}) is None
    assert check_arguments("http_get", {"url": "https://example.com"}, {"url": "http://example.com"}) is not None
    assert check_arguments("http_get", {"url": "https://a.org/x"}, {"url": "https://a.org/X"}) is not None
    assert check_arguments("http_get", {"url": "https://a.org/x"}, {"url": "https://a.org"}) is not None


def test_tool_set_match_is_exact_and_ignores_repeats() -> None:
    assert tool_set_match(frozenset({"calculator"}), ["calculator", "calculator"])
    assert tool_set_match(frozenset(), [])
    assert not tool_set_match(frozenset(), ["calculator"])
    assert not tool_set_match(frozenset({"calculator", "clock"}), ["calculator"])
    assert not tool_set_match(frozenset({"calculator"}), ["calculator", "clock"])


# ------------------------------------------------------------------------------------------- answers


def clock_call(output: str = '{"time": "14:05", "date": "2025-11-29", "weekday": "Saturday"}') -> ToolCall:
    return ToolCall("c1", "clock", '{"timezone": "Asia/Tokyo"}', status="OK", output_json=output)


@pytest.mark.parametrize(
    ("answer", "ok"),
    [
        ("In Tokyo it is 14:05.", True),
        ("It's 2:05 PM in Tokyo.", True),
        ("It is 14:50 in Tokyo.", False),
        ("It is 12:05.", False),  # "2:05" inside "12:05" is not the time
        ("It is five past two.", False),
    ],
)
def test_answer_must_state_the_clocks_time(answer: str, ok: bool) -> None:
    assert (check_answer(AnswerSpec(tool_result="clock.time"), answer, [clock_call()]) is None) is ok


@pytest.mark.parametrize(
    ("answer", "ok"),
    [
        ("Today is 2025-11-29.", True),
        ("Today is Saturday, November 29, 2025.", True),
        ("It's the 29th of November.", True),
        ("Today is Nov. 29", True),
        ("Today is 11/29/2025", True),
        ("Today is November 28, 2025.", False),
        ("Today is November 2, 2025.", False),
    ],
)
def test_answer_must_state_the_clocks_date(answer: str, ok: bool) -> None:
    assert (check_answer(AnswerSpec(tool_result="clock.date"), answer, [clock_call()]) is None) is ok


def test_tool_result_needs_a_successful_call_of_that_tool() -> None:
    failed = ToolCall("c1", "clock", "{}", status="FAILED", error_message="unknown time zone")
    assert check_answer(AnswerSpec(tool_result="clock.time"), "It is 14:05.", [failed]) is not None
    assert check_answer(AnswerSpec(tool_result="clock.time"), "It is 14:05.", []) is not None
    weekday = AnswerSpec(tool_result="clock.weekday")
    assert check_answer(weekday, "It's saturday!", [clock_call()]) is None
    assert check_answer(weekday, "It's Sunday!", [clock_call()]) is not None


def test_numbers_words_and_errors_in_answers() -> None:
    assert check_answer(AnswerSpec(numbers=(12.0, 1360.78)), "12, and 1,360.777 g", []) is None
    assert check_answer(AnswerSpec(numbers=(12.0, 1360.78)), "12, and 1370 g", []) is not None
    assert check_answer(AnswerSpec(any_of=("Paris",)), "the capital is paris", []) is None
    assert check_answer(AnswerSpec(any_of=("Paris",)), "the capital is Lyon", []) is not None
    error = AnswerSpec(mentions_error=True)
    assert check_answer(error, "Sorry, I can't convert furlongs.", []) is None
    assert check_answer(error, "That unit is not supported.", []) is None
    assert check_answer(error, "4 furlongs is 804.67 meters.", []) is not None
    both = AnswerSpec(numbers=(1081.0,), tool_result="clock.time")
    assert check_answer(both, "23*47 = 1081 and it is 14:05", [clock_call()]) is None
    assert check_answer(both, "23*47 = 1081", [clock_call()]) is not None


# ------------------------------------------------------------------------------------------- scoring


def record(
    tools: Sequence[str],
    calls: Sequence[ToolCall] = (),
    *,
    args: dict[str, dict[str, Any]] | None = None,
    answer_spec: AnswerSpec | None = None,
    answer: str = "",
    mode: str = "embedding",
    split: str = "dev",
    category: str = "calculator",
    case_id: str = "dev-x",
    generations: int = 2,
    latency_s: float = 1.0,
    error: str = "",
    message: str = "What is 23*47?",
) -> TurnRecord:
    spec = TurnSpec(message, frozenset(tools), args or {}, answer_spec)
    return TurnRecord(
        case_id,
        category,
        split,
        mode,
        1,
        spec,
        calls=list(calls),
        answer=answer,
        generations=generations,
        tool_selection=mode,
        ttft_client_s=latency_s / 2,
        ttft_server_s=latency_s / 2,
        latency_s=latency_s,
        error=error,
    )


def calc(expression: str, result: str = "1081") -> ToolCall:
    return ToolCall("c", "calculator", f'{{"expression": "{expression}"}}', "OK", f'{{"result": {result}}}')


def test_a_right_turn_scores_on_every_count() -> None:
    r = record(
        ["calculator"],
        [calc("23*47")],
        args={"calculator": {"result": 1081}},
        answer_spec=AnswerSpec(numbers=(1081.0,)),
        answer="23*47 = 1081.",
    )
    score = score_turn(r)
    assert score.tool_ok and score.args == (("calculator", None),) and score.answer_ok is True
    assert not score.failed


def test_wrong_tool_wrong_args_and_wrong_answer_each_fail() -> None:
    args = {"calculator": {"result": 1081}}
    wrong_tool = score_turn(record(["calculator"], [ToolCall("c", "clock", "{}")], args=args))
    assert not wrong_tool.tool_ok and wrong_tool.args == () and wrong_tool.failed
    wrong_args = score_turn(record(["calculator"], [calc("23*46", "1058")], args=args))
    assert wrong_args.tool_ok and wrong_args.args[0][1] is not None and wrong_args.failed
    wrong_answer = score_turn(
        record(["calculator"], [calc("23*47")], answer_spec=AnswerSpec(numbers=(1081.0,)), answer="It is 51.5")
    )
    assert wrong_answer.tool_ok and wrong_answer.answer_ok is False and wrong_answer.failed
    unchecked = score_turn(record([], [], answer="Hello!"))
    assert unchecked.answer_ok is None and not unchecked.failed


def test_any_call_of_a_tool_may_carry_the_right_arguments() -> None:
    r = record(["calculator"], [calc("23*46", "1058"), calc("23*47")], args={"calculator": {"result": 1081}})
    assert score_turn(r).args == (("calculator", None),)


def test_an_errored_turn_fails_choice_and_answer() -> None:
    r = record(
        ["calculator"],
        [calc("23*47")],
        answer_spec=AnswerSpec(numbers=(1081.0,)),
        answer="1081",
        error="DEADLINE_EXCEEDED: too slow",
    )
    score = score_turn(r)
    assert not score.tool_ok and score.answer_ok is False and score.failed


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [([], 50, None), ([5.0], 95, 5.0), ([1.0, 2.0, 3.0, 4.0], 50, 2.5), ([3.0, 1.0, 2.0], 0, 1.0)],
)
def test_percentile_by_hand(values: list[float], q: float, expected: float | None) -> None:
    assert percentile(values, q) == expected


def test_percentile_matches_numpy_linear_interpolation() -> None:
    rng = random.Random(7)
    for n in (2, 3, 10, 37):
        values = [rng.uniform(0, 10) for _ in range(n)]
        for q in (50, 90, 95, 99):
            assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_summary_counts_and_single_tool_figures() -> None:
    args = {"calculator": {"result": 1081}}
    records = [
        record(["calculator"], [calc("23*47")], args=args, generations=2, latency_s=1.0),
        record(["calculator"], [calc("2")], args=args, generations=3, latency_s=3.0),
        record(
            ["calculator", "clock"], [calc("23*47"), clock_call()], generations=4, latency_s=5.0, category="multi_tool"
        ),
        record([], [], generations=1, latency_s=0.5, category="none"),
        record([], [calc("1")], generations=2, latency_s=0.7, category="near_miss"),
        record(["calculator"], [], error="no TurnCompleted within 120 s", generations=0),
    ]
    s = summarise(records)
    assert (s.turns, s.errors) == (6, 1)
    assert (s.tool_choice.hits, s.tool_choice.total) == (4, 6)
    assert (s.arguments.hits, s.arguments.total) == (1, 2)
    assert s.answers.total == 0 and str(s.answers) == "–"
    assert s.generations_mean == pytest.approx((2 + 3 + 4 + 1 + 2) / 5)  # errored turns have no figures
    assert s.single_tool_generations_mean == pytest.approx(2.5)
    assert s.single_tool_generations_max == 3
    assert s.single_tool_latency_p50 == pytest.approx(2.0)
    assert s.latency_p50 == pytest.approx(1.0)
    assert s.selection == {"embedding": 5}
    assert (s.by_category["calculator"].hits, s.by_category["calculator"].total) == (2, 3)
    assert list(s.by_category) == ["calculator", "none", "near_miss", "multi_tool"]
    assert str(s.tool_choice) == "4/6 (66.7 %)"


# -------------------------------------------------------------------------------------------- report


def two_mode_report() -> Report:
    secret = "Quietly compute 17 times 19 for me"
    records = [
        record(["calculator"], [], mode=m, split="heldout", case_id="heldout-a", message=secret, answer="Nope 321")
        for m in ("embedding", "llm")
    ]
    records += [
        record(
            ["calculator"],
            [calc("23*46", "1058")],
            mode=m,
            args={"calculator": {"result": 1081}},
            answer="It is 1058",
            latency_s=lat,
        )
        for m, lat in (("embedding", 1.0), ("llm", 4.0))
    ]
    return Report(("embedding", "llm"), ("dev", "heldout"), {"dev": 1, "heldout": 1}, records)


def test_report_lists_dev_failures_in_full_and_withholds_held_out_prompts() -> None:
    info = RunInfo("python -m evals", "2025-11-29 12:00 UTC", "AMD EPYC, 2 cores, no GPU", "SmolLM2-135M-Instruct")
    text = render_markdown(two_mode_report(), info)
    for heading in (
        "# Agent evaluation",
        "## Held-out split (headline)",
        "## Dev split (tuned on)",
        "## Failing turns",
        "### heldout: 2 failing turns",
        "### dev: 2 failing turns",
    ):
        assert heading in text
    assert text.index("## Held-out") < text.index("## Dev")
    assert "tuned on the **dev** split and on the tuning sessions' own prompts, never on" in text
    assert "What is 23*47?" in text and "23*46" in text and "It is 1058" in text
    assert "heldout-a" in text
    assert "Quietly compute" not in text and "Nope 321" not in text
    assert "embedding ÷ llm: **0.25**" in text
    shown = render_markdown(two_mode_report(), info, show_heldout=True)
    assert "Quietly compute" in shown and "Nope 321" in shown


def test_progress_lines_carry_no_message_or_answer() -> None:
    line = progress_line(two_mode_report().records[0])
    assert "heldout-a#1 embedding" in line and "choice=FAIL" in line
    assert "Quietly" not in line and "321" not in line


# ---------------------------------------------------------------------------------------- case files


def test_case_files_load_and_cover_every_category_in_both_splits() -> None:
    cases = load_cases(SPLITS)
    counts = Counter(c.split for c in cases)
    assert sum(counts.values()) >= 80
    assert 0.35 <= counts["dev"] / sum(counts.values()) <= 0.45
    for split in SPLITS:
        # Every category of the built-in suite ("single" and "builtin" are the generality eval's own).
        assert {c.category for c in cases if c.split == split} == set(CATEGORIES) - {"single", "builtin"}
        assert all(c.id.startswith(f"{split}-") for c in cases if c.split == split)
    for case in cases:
        assert (len(case.turns) > 1) == (case.category == "follow_up"), case.id
        if case.category == "multi_tool":
            assert all(len(t.tools) >= 2 for t in case.turns), case.id
        if case.category in ("none", "near_miss"):
            assert all(not t.tools for t in case.turns), case.id


def test_expected_numbers_agree_with_the_tools() -> None:
    """A wrong expectation would fail a right answer: check each against the tools' own arithmetic."""
    for case in load_cases(SPLITS):
        for turn in case.turns:
            answer = turn.answer or AnswerSpec()
            unit = turn.args.get("unit_convert")
            if unit is not None and answer.mentions_error:
                with pytest.raises(ToolError):
                    convert(unit["value"], str(unit["from_unit"]), str(unit["to_unit"]))
            elif unit is not None:
                value = convert(unit["value"], unit["from_unit"], unit["to_unit"])
                assert any(contains_number(f"{value}", n) for n in answer.numbers), case.id
            calc_args = turn.args.get("calculator")
            if calc_args is not None:
                assert calc_args["result"] in answer.numbers, case.id


def _normal(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def _string_literals(folder: Path) -> set[str]:
    found = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.add(_normal(node.value))
    return found


def test_no_held_out_message_is_a_tuning_example() -> None:
    """Held-out prompts must not appear as a string anywhere in services/ (tool and router examples) or in dev.

    Read from the source rather than from the tools' or the router's APIs, which
    change as the router is tuned. Only ids are printed, so a failure does not
    show the held-out text.
    """
    seen = _string_literals(Path(services.__file__).parent)
    seen |= {_normal(t.message) for c in load_cases(["dev"]) for t in c.turns}
    seen |= {_normal(t.message) for c in load_cases(["dev"], PROBES_DIR) for t in c.turns}  # tuned on too
    held_out = [*load_cases(["heldout"]), *load_cases(["heldout"], PROBES_DIR)]
    held_out += [c for folder in BLIND_DIRS for c in load_cases(["heldout"], folder)]
    leaked = sorted({c.id for c in held_out for t in c.turns if _normal(t.message) in seen})
    assert not leaked, f"held-out cases that are also tuning examples: {leaked}"


@pytest.mark.parametrize(
    "bad",
    [
        {"id": "x", "category": "weather", "turns": [{"message": "m", "tools": []}]},
        {"id": "x", "category": "none", "turns": []},
        {"id": "x", "category": "none", "turns": [{"message": " ", "tools": []}]},
        {"id": "x", "category": "none", "turns": [{"message": "m", "tools": ["weather"]}]},
        {
            "id": "x",
            "category": "none",
            "turns": [{"message": "m", "tools": [], "args": {"clock": {"timezone": "UTC"}}}],
        },
        {
            "id": "x",
            "category": "clock",
            "turns": [{"message": "m", "tools": ["clock"], "args": {"clock": {"tz": "UTC"}}}],
        },
        {"id": "x", "category": "none", "turns": [{"message": "m", "tools": [], "answer": {"contains_number": "12"}}]},
        {
            "id": "x",
            "category": "none",
            "turns": [{"message": "m", "tools": [], "answer": {"tool_result": "clock.time"}}],
        },
        {"id": "x", "category": "none", "turns": [{"message": "m", "tools": [], "answer": {"vibes": True}}]},
        {"id": "X Y", "category": "none", "turns": [{"message": "m", "tools": []}]},
        {"id": "x", "category": "none", "turns": [{"message": "m", "tools": []}], "extra": 1},
    ],
)
def test_malformed_cases_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(CaseError, match="here:1"):
        parse_case(bad, "dev", "here:1")


# ---------------------------------------------------------------------------------- runner on a fake


class FakeCall:
    """A Converse stream that answers each StartTurn with a scripted turn (one tool call per message with digits)."""

    def __init__(self, log: list[tuple[str, str, str]], mode: str, fail_on: str) -> None:
        self._log, self._mode, self._fail_on = log, mode, fail_on
        self._events: asyncio.Queue[Any] = asyncio.Queue()
        self.cancelled = False

    async def write(self, request: agent_pb2.ConverseRequest) -> None:
        start = request.start_turn
        self._log.append((self._mode, start.message, start.session_id))
        if start.message == self._fail_on:
            return  # never answers: the runner's timeout ends the turn
        session = start.session_id or f"s-{self._mode}-{len(self._log)}"
        out = [agent_pb2.ConverseResponse(turn_accepted=agent_pb2.TurnAccepted(session_id=session, turn_id="t"))]
        if any(ch.isdigit() for ch in start.message):
            out.append(
                agent_pb2.ConverseResponse(
                    tool_call_started=agent_pb2.ToolCallStarted(
                        call_id="c1", tool_name="calculator", arguments_json='{"expression": "23*47"}', round=1
                    )
                )
            )
            out.append(
                agent_pb2.ConverseResponse(
                    tool_call_finished=agent_pb2.ToolCallFinished(
                        call_id="c1",
                        tool_name="calculator",
                        status=common_pb2.TOOL_CALL_STATUS_OK,
                        output_json='{"result": 1081}',
                    )
                )
            )
        out.append(agent_pb2.ConverseResponse(text_delta=agent_pb2.TextDelta(text="It is ")))
        out.append(agent_pb2.ConverseResponse(text_delta=agent_pb2.TextDelta(text="1,081.")))
        completed = agent_pb2.TurnCompleted(turn_id="t", generations=3, tool_selection=agent_pb2.TOOL_SELECTION_LLM)
        completed.time_to_first_token.FromMilliseconds(250)
        out.append(agent_pb2.ConverseResponse(turn_completed=completed))
        for event in out:
            self._events.put_nowait(event)

    async def read(self) -> Any:
        return await self._events.get()

    async def done_writing(self) -> None:
        self._events.put_nowait(grpc.aio.EOF)

    async def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.OK

    def cancel(self) -> bool:
        self.cancelled = True
        return True


class FakeStub:
    def __init__(self, log: list[tuple[str, str, str]], mode: str, fail_on: str = "") -> None:
        self._log, self._mode, self._fail_on = log, mode, fail_on

    def Converse(self, metadata: Sequence[tuple[str, str]] = ()) -> FakeCall:
        assert ("x-agentmesh-tenant", "agentmesh-eval") in metadata
        return FakeCall(self._log, self._mode, self._fail_on)


def fake_cases() -> list[Case]:
    calc_turn = TurnSpec(
        "What is 23*47?", frozenset({"calculator"}), {"calculator": {"result": 1081}}, AnswerSpec(numbers=(1081.0,))
    )
    return [
        Case("dev-a", "calculator", "dev", (calc_turn,)),
        Case("dev-b", "follow_up", "dev", (TurnSpec("Hi", frozenset()), calc_turn)),
        Case("heldout-c", "none", "heldout", (TurnSpec("Hello", frozenset()),)),
    ]


async def test_runner_interleaves_modes_and_continues_sessions() -> None:
    log: list[tuple[str, str, str]] = []
    lines: list[str] = []
    stubs = {"embedding": FakeStub(log, "embedding"), "llm": FakeStub(log, "llm")}
    report = await run_eval(fake_cases(), stubs, progress=lines.append)
    assert [(m, msg) for m, msg, _ in log] == [
        ("embedding", "What is 23*47?"),
        ("llm", "What is 23*47?"),
        ("llm", "Hi"),
        ("llm", "What is 23*47?"),
        ("embedding", "Hi"),
        ("embedding", "What is 23*47?"),
        ("embedding", "Hello"),
        ("llm", "Hello"),
    ]
    # A follow-up turn continues the session its first turn was given; a new case starts a new one.
    assert log[3][2] == "s-llm-3" and log[5][2] == "s-embedding-5"
    assert log[2][2] == log[4][2] == log[6][2] == ""
    assert report.cases == {"dev": 2, "heldout": 1} and report.turns("dev") == 3 and report.turns("heldout") == 1
    assert len(lines) == 8 and lines[0].startswith("[1/8] dev-a#1 embedding")
    first = report.select("embedding", "dev")[0]
    assert first.calls[0].status == "OK" and first.answer == "It is 1,081." and first.generations == 3
    assert first.tool_selection == "llm" and first.ttft_server_s == pytest.approx(0.25)
    assert first.ttft_client_s is not None and first.latency_s is not None
    summary = report.summary("embedding", "dev")
    assert str(summary.tool_choice) == "3/3 (100.0 %)"
    assert str(summary.answers) == "2/2 (100.0 %)" and str(summary.arguments) == "2/2 (100.0 %)"


async def test_a_turn_that_never_completes_times_out_and_skips_the_rest_of_its_session() -> None:
    log: list[tuple[str, str, str]] = []
    stubs = {"embedding": FakeStub(log, "embedding", fail_on="Hi")}
    report = await run_eval(fake_cases()[1:2], stubs, turn_timeout_s=0.05)
    first, second = report.records
    assert first.error.startswith("no TurnCompleted within") and second.error.startswith("not run")
    assert [msg for _, msg, _ in log] == ["Hi"]
    assert report.summary("embedding", "dev").errors == 2


def test_the_eval_runs_on_a_folder_of_cases_of_ones_own(tmp_path: Path) -> None:
    case = {"id": "mine-01", "category": "calculator", "turns": [{"message": "What is 6*7?", "tools": ["calculator"]}]}
    (tmp_path / "dev.jsonl").write_text(json.dumps(case) + "\n", encoding="utf-8")
    args = parse_args(["--cases", str(tmp_path), "--split", "dev", "--modes", "embedding"])
    assert args.cases_dir == tmp_path and args.splits == ("dev",) and args.modes == ("embedding",)
    assert [c.id for c in load_cases(args.splits, args.cases_dir)] == ["mine-01"]
    assert parse_args([]).cases_dir == CASES_DIR
