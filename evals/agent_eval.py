"""The agent-turn evaluation: cases, running them through a mesh, scoring, and the report.

Why: the router's tool selection is tuned on prompts someone looked at. To know
whether a change generalises, the same harness runs a *dev* split (tuned on)
and a *held-out* split (never shown to whoever tunes) through the real mesh —
real gRPC streams, the real agent loop, the real tools — and compares the
router's tool-selection modes in one run, interleaved, so machine noise lands
on every mode alike.

Case files (``cases/<split>.jsonl``), one JSON object per line::

    {"id": "dev-calc-01", "category": "calculator",
     "turns": [{"message": "...", "tools": ["calculator"],
                "args": {"calculator": {"result": 1081}},
                "answer": {"contains_number": 1081}}]}

- ``tools``: the exact set of tools the turn should call (``[]``: none).
- ``args`` (optional, per expected tool): what the arguments must *mean*:
  calculator ``{"result": n}`` (the expression evaluates, with the tool's own
  evaluator, to n); unit_convert ``{"value": n, "from_unit": u, "to_unit": u}``
  (the call's ``quantity`` read by the tool's own parser; units compared after
  the tool's own alias table); clock ``{"timezone": z}``
  (resolved as the tool resolves it, so "Tokyo" is Asia/Tokyo);
  kb_search ``{"keywords": [...]}`` (the query is non-empty and shares one:
  a query word starting with a keyword); http_get ``{"url": u}``. A unit or a
  time zone may be a list of accepted spellings. A tool without an entry is
  scored for choice only.
- ``answer`` (optional, only where the answer is checkable; every key given
  must hold): ``contains_number`` (a number or a list, each within 0.1 %;
  "1,081" reads as 1081), ``contains_any`` (strings, case-insensitive),
  ``tool_result`` (``"tool.field"``: the answer states that field of the tool's
  actual output, e.g. ``clock.time`` as HH:MM), ``mentions_error`` (the answer
  says the request could not be done).

A turn is a failure of tool choice when the set of tools it called differs
from ``tools``. Arguments are scored per expected tool that was called and has
an ``args`` entry (any call of that tool may match). A turn that errored or
timed out fails tool choice and its answer check.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard
from urllib.parse import urlsplit, urlunsplit

import grpc
import grpc.aio

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from services.tools.builtin import unit_convert
from services.tools.builtin.calculator import evaluate
from services.tools.builtin.clock import resolve_zone
from services.tools.builtin.kb_search import words
from services.tools.registry import ToolError

CASES_DIR = Path(__file__).resolve().parent / "cases"
SPLITS = ("dev", "heldout")
CATEGORIES = (
    "calculator",
    "unit_convert",
    "clock",
    "kb_search",
    "http_get",
    "none",
    "near_miss",
    "multi_tool",
    "follow_up",
)
#: Per tool, the argument expectations a case may state.
ARG_FIELDS: dict[str, frozenset[str]] = {
    "calculator": frozenset({"result"}),
    "unit_convert": frozenset({"value", "from_unit", "to_unit"}),
    "clock": frozenset({"timezone"}),
    "kb_search": frozenset({"keywords"}),
    "http_get": frozenset({"url"}),
}
ANSWER_KEYS = frozenset({"contains_number", "contains_any", "tool_result", "mentions_error"})
#: A number stated in an answer may be rounded: "11.02" for 11.0231.
ANSWER_REL_TOL = 1e-3
#: Argument values are exact up to float noise ("15/100*80" is 12.000000000000002).
ARG_REL_TOL = 1e-6
#: What an answer says when it relays a failure (an unsupported unit).
ERROR_PHRASES = (
    "cannot",
    "can't",
    "can not",
    "couldn't",
    "could not",
    "unable",
    "not able",
    "unknown",
    "not supported",
    "unsupported",
    "isn't supported",
    "not recognized",
    "not recognised",
    "don't recognize",
    "error",
)
DEFAULT_TURN_TIMEOUT_S = 120.0
#: The router takes the tenant from this header (the gateway sets it after auth); the eval's sessions
#: live under their own tenant, so they can be told apart and deleted.
TENANT_HEADER = "x-agentmesh-tenant"
EVAL_TENANT = "agentmesh-eval"
EXCERPT_CHARS = 200


class CaseError(ValueError):
    """A case file that does not follow the schema (the message names the file and line)."""


# ---------------------------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class AnswerSpec:
    """What a checkable answer must contain; every non-empty field must hold."""

    numbers: tuple[float, ...] = ()
    any_of: tuple[str, ...] = ()
    tool_result: str = ""
    mentions_error: bool = False


@dataclass(frozen=True)
class TurnSpec:
    """One user message and what the agent should do with it."""

    message: str
    tools: frozenset[str]
    args: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    answer: AnswerSpec | None = None


@dataclass(frozen=True)
class Case:
    """A conversation of one or more turns in one session."""

    id: str
    category: str
    split: str
    turns: tuple[TurnSpec, ...]


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _spellings(value: Any) -> bool:
    return (isinstance(value, str) and bool(value)) or (
        isinstance(value, list) and bool(value) and all(isinstance(v, str) and v for v in value)
    )


def _parse_args(tool: str, spec: Any, where: str) -> dict[str, Any]:
    if tool not in ARG_FIELDS:
        raise CaseError(f"{where}: args for unknown tool {tool!r}")
    if not isinstance(spec, dict) or set(spec) != ARG_FIELDS[tool]:
        raise CaseError(f"{where}: args of {tool} must have exactly {sorted(ARG_FIELDS[tool])}")
    ok = {
        "calculator": lambda: _is_number(spec["result"]),
        "unit_convert": lambda: (
            _is_number(spec["value"]) and _spellings(spec["from_unit"]) and _spellings(spec["to_unit"])
        ),
        "clock": lambda: _spellings(spec["timezone"]),
        "kb_search": lambda: (
            isinstance(spec["keywords"], list)
            and bool(spec["keywords"])
            and all(isinstance(k, str) and words(k) == [k] for k in spec["keywords"])
        ),
        "http_get": lambda: isinstance(spec["url"], str) and bool(urlsplit(spec["url"]).hostname),
    }[tool]()
    if not ok:
        raise CaseError(f"{where}: malformed args of {tool}: {spec!r}")
    return dict(spec)


def _parse_answer(spec: Any, where: str) -> AnswerSpec:
    if not isinstance(spec, dict) or not spec or not set(spec) <= ANSWER_KEYS:
        raise CaseError(f"{where}: answer must be an object with keys among {sorted(ANSWER_KEYS)}")
    raw_numbers = spec.get("contains_number", [])
    numbers = raw_numbers if isinstance(raw_numbers, list) else [raw_numbers]
    any_of = spec.get("contains_any", [])
    tool_result = spec.get("tool_result", "")
    mentions_error = spec.get("mentions_error", False)
    if not all(_is_number(n) for n in numbers):
        raise CaseError(f"{where}: contains_number must be a number or a list of numbers")
    if not isinstance(any_of, list) or not all(isinstance(s, str) and s for s in any_of):
        raise CaseError(f"{where}: contains_any must be a list of strings")
    if not isinstance(tool_result, str) or (tool_result and tool_result.count(".") != 1):
        raise CaseError(f"{where}: tool_result must read 'tool.field'")
    if tool_result and tool_result.split(".")[0] not in ARG_FIELDS:
        raise CaseError(f"{where}: tool_result names an unknown tool")
    if mentions_error is not True and "mentions_error" in spec:
        raise CaseError(f"{where}: mentions_error, when given, must be true")
    return AnswerSpec(tuple(float(n) for n in numbers), tuple(any_of), tool_result, mentions_error is True)


def parse_case(obj: Any, split: str, where: str) -> Case:
    """One case from its JSON object; ``CaseError`` names ``where`` on any deviation from the schema."""
    if not isinstance(obj, dict) or set(obj) != {"id", "category", "turns"}:
        raise CaseError(f"{where}: a case has exactly the keys id, category, turns")
    case_id, category, raw_turns = obj["id"], obj["category"], obj["turns"]
    if not isinstance(case_id, str) or not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", case_id):
        raise CaseError(f"{where}: id must be lower-case letters, digits, '-' and '_'")
    if category not in CATEGORIES:
        raise CaseError(f"{where}: unknown category {category!r}; one of {', '.join(CATEGORIES)}")
    if not isinstance(raw_turns, list) or not raw_turns:
        raise CaseError(f"{where}: turns must be a non-empty list")
    turns = []
    for i, raw in enumerate(raw_turns, 1):
        at = f"{where} ({case_id} turn {i})"
        if not isinstance(raw, dict) or not {"message", "tools"} <= set(raw) <= {"message", "tools", "args", "answer"}:
            raise CaseError(f"{at}: a turn has message, tools and optionally args, answer")
        message, tools = raw["message"], raw["tools"]
        if not isinstance(message, str) or not message.strip():
            raise CaseError(f"{at}: message must be a non-empty string")
        if not isinstance(tools, list) or not all(t in ARG_FIELDS for t in tools) or len(set(tools)) != len(tools):
            raise CaseError(f"{at}: tools must list distinct names among {', '.join(ARG_FIELDS)}")
        args_raw = raw.get("args", {})
        if not isinstance(args_raw, dict) or not set(args_raw) <= set(tools):
            raise CaseError(f"{at}: args may only be given for the expected tools")
        args = {tool: _parse_args(tool, spec, at) for tool, spec in args_raw.items()}
        answer = _parse_answer(raw["answer"], at) if "answer" in raw else None
        if answer is not None and answer.tool_result and answer.tool_result.split(".")[0] not in tools:
            raise CaseError(f"{at}: tool_result names a tool the turn does not expect")
        turns.append(TurnSpec(message, frozenset(tools), args, answer))
    return Case(case_id, category, split, tuple(turns))


def load_split(split: str, folder: Path = CASES_DIR) -> list[Case]:
    """The cases of one split, in file order."""
    path = folder / f"{split}.jsonl"
    cases = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path.name}:{number}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CaseError(f"{where}: not JSON: {exc.msg}") from None
        cases.append(parse_case(obj, split, where))
    return cases


def load_cases(splits: Iterable[str], folder: Path = CASES_DIR) -> list[Case]:
    """The cases of several splits, split by split; ids must be unique across them."""
    cases = [case for split in splits for case in load_split(split, folder)]
    seen = Counter(case.id for case in cases)
    duplicates = sorted(case_id for case_id, n in seen.items() if n > 1)
    if duplicates:
        raise CaseError(f"duplicate case ids: {', '.join(duplicates)}")
    return cases


# -------------------------------------------------------------------------------------------- records


@dataclass
class ToolCall:
    """One tool call of a turn, from its ToolCallStarted and ToolCallFinished events."""

    call_id: str
    name: str
    arguments_json: str
    status: str = ""
    output_json: str = ""
    error_message: str = ""

    def arguments(self) -> dict[str, Any] | None:
        try:
            value = json.loads(self.arguments_json)
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None

    def output(self) -> dict[str, Any] | None:
        if self.status != "OK" or not self.output_json:
            return None
        try:
            value = json.loads(self.output_json)
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None


@dataclass
class TurnRecord:
    """What one turn of one case did under one mode, as the client saw it."""

    case_id: str
    category: str
    split: str
    mode: str
    turn_index: int
    expected: TurnSpec
    session_id: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    answer: str = ""
    generations: int = 0
    tool_selection: str = "unspecified"
    cached: bool = False
    ttft_client_s: float | None = None
    ttft_server_s: float | None = None
    latency_s: float | None = None
    planning_s: float | None = None
    error: str = ""

    @property
    def message(self) -> str:
        return self.expected.message

    @property
    def tools_called(self) -> frozenset[str]:
        return frozenset(c.name for c in self.calls)


# -------------------------------------------------------------------------------------------- scoring

_NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


def extract_numbers(text: str) -> list[float]:
    """Every number written in ``text``: "1,081" is 1081; a '-' is a sign only where it is not a minus."""
    text = text.replace("\u2212", "-")
    numbers = []
    for match in _NUMBER.finditer(text):
        token = match.group()
        if token.startswith("-"):
            before = text[match.start() - 1] if match.start() > 0 else " "
            if before.isalnum() or before in ")]":
                token = token[1:]  # "9876-1234": subtraction, not a negative number
        numbers.append(float(token.replace(",", "")))
    return numbers


def numbers_close(a: float, b: float, rel_tol: float = ANSWER_REL_TOL) -> bool:
    return math.isclose(a, b, rel_tol=rel_tol, abs_tol=1e-9)


def contains_number(text: str, expected: float, rel_tol: float = ANSWER_REL_TOL) -> bool:
    return any(numbers_close(n, expected, rel_tol) for n in extract_numbers(text))


def normalise_unit(name: str) -> str:
    """A unit as the unit_convert tool reads it (its own alias table: "kilograms" is "kg").

    A unit the tool does not know keeps a plain form (lower case, single
    spaces, no plural "s"), so an unsupported unit can still be expected.
    """
    try:
        return unit_convert.unit(name).name
    except ToolError:
        return " ".join(name.lower().split()).removesuffix("s")


def normalise_zone(name: str) -> str:
    """A time zone as the clock tool resolves it ("tokyo" is Asia/Tokyo); unknown names stay as written."""
    try:
        return resolve_zone(name.strip()).key
    except ToolError:
        return name.strip()


def normalise_url(url: str) -> str:
    """Scheme and host are case-insensitive and a bare host is the same page as host + "/"."""
    parts = urlsplit(url.strip())
    path = "" if parts.path == "/" else parts.path
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, parts.query, ""))


def _accepted(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def check_arguments(tool: str, expected: Mapping[str, Any], arguments: Mapping[str, Any] | None) -> str | None:
    """None when the call's arguments mean what ``expected`` says; otherwise why not."""
    if arguments is None:
        return "arguments are not a JSON object"
    if tool == "calculator":
        expression = arguments.get("expression")
        if not isinstance(expression, str):
            return "no expression"
        try:
            result = evaluate(expression)
        except Exception as exc:  # anything the tool would refuse is a wrong argument
            return f"{expression!r} does not evaluate ({exc})"
        if not numbers_close(float(result), float(expected["result"]), ARG_REL_TOL):
            return f"{expression!r} = {result}, expected {expected['result']}"
        return None
    if tool == "unit_convert":
        value, source, target = arguments.get("value"), arguments.get("from_unit"), arguments.get("to_unit")
        if isinstance(arguments.get("quantity"), str):  # the tool's schema: "3 gallons", read as the tool reads it
            try:
                value, source = unit_convert.parse_quantity(arguments["quantity"])
            except ToolError as exc:
                return f"quantity {arguments['quantity']!r} does not parse ({exc})"
        problems = []
        if not _is_number(value) or not numbers_close(float(value), float(expected["value"]), ARG_REL_TOL):
            problems.append(f"value {value!r}, expected {expected['value']}")
        for name, got, want in (("from_unit", source, expected["from_unit"]), ("to_unit", target, expected["to_unit"])):
            if not isinstance(got, str) or normalise_unit(got) not in {normalise_unit(u) for u in _accepted(want)}:
                problems.append(f"{name} {got!r}, expected {want!r}")
        return "; ".join(problems) or None
    if tool == "clock":
        zone = arguments.get("timezone")
        accepted = {normalise_zone(z) for z in _accepted(expected["timezone"])}
        if not isinstance(zone, str) or normalise_zone(zone) not in accepted:
            return f"timezone {zone!r}, expected {expected['timezone']!r}"
        return None
    if tool == "kb_search":
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            return "empty query"
        terms = words(query)
        if not any(term.startswith(keyword) for term in terms for keyword in expected["keywords"]):
            return f"query {query!r} shares no keyword with {expected['keywords']}"
        return None
    if tool == "http_get":
        url = arguments.get("url")
        if not isinstance(url, str) or normalise_url(url) != normalise_url(expected["url"]):
            return f"url {url!r}, expected {expected['url']!r}"
        return None
    return f"no argument check for tool {tool!r}"


def tool_set_match(expected: frozenset[str], called: Iterable[str]) -> bool:
    """Exact set match: every expected tool called, nothing else (repeats of one tool are fine)."""
    return set(called) == set(expected)


_MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]


def _states_time(answer: str, hhmm: str) -> bool:
    """HH:MM as the tool wrote it, or the same minute in 12-hour form ("14:05" → "2:05")."""
    hour, minute = int(hhmm[:2]), hhmm[3:5]
    forms = {f"{hour:02d}:{minute}", f"{hour}:{minute}", f"{hour % 12 or 12}:{minute}"}
    return any(re.search(rf"(?<!\d){re.escape(f)}(?!\d)", answer) for f in forms)


def _states_date(answer: str, iso: str) -> bool:
    """The ISO date, a numeric d/m/y or m/d/y form, or the month's name next to the day."""
    year, month, day = (int(p) for p in iso.split("-"))
    text = answer.lower()
    numeric = {iso}
    for m, d in ((f"{month}", f"{day}"), (f"{month:02d}", f"{day:02d}")):
        numeric |= {f"{m}/{d}/{year}", f"{d}/{m}/{year}", f"{d}.{m}.{year}"}
    if any(form in text for form in numeric):
        return True
    name = _MONTHS[month - 1]
    names = rf"(?:{name}|{name[:3]}\.?)"
    ordinal = rf"0?{day}(?:st|nd|rd|th)?(?!\d)"
    return bool(re.search(rf"\b{names}\s+{ordinal}|(?<!\d){ordinal}\s+(?:of\s+)?{names}\b", text))


def _states_field(answer: str, tool: str, name: str, value: Any) -> bool:
    if tool == "clock" and name == "time" and isinstance(value, str) and re.fullmatch(r"\d\d:\d\d", value):
        return _states_time(answer, value)
    if tool == "clock" and name == "date" and isinstance(value, str) and re.fullmatch(r"\d{4}-\d\d-\d\d", value):
        return _states_date(answer, value)
    if _is_number(value):
        return contains_number(answer, float(value))
    return isinstance(value, str) and bool(value) and value.lower() in answer.lower()


def check_answer(spec: AnswerSpec, answer: str, calls: Sequence[ToolCall]) -> str | None:
    """None when the answer holds every expectation of ``spec``; otherwise what is missing."""
    problems = []
    missing = [n for n in spec.numbers if not contains_number(answer, n)]
    if missing:
        problems.append("no " + ", ".join(f"{n:g}" for n in missing))
    if spec.any_of and not any(s.lower() in answer.lower() for s in spec.any_of):
        problems.append("none of " + ", ".join(repr(s) for s in spec.any_of))
    if spec.tool_result:
        tool, name = spec.tool_result.split(".")
        values = [out[name] for c in calls if c.name == tool and (out := c.output()) is not None and name in out]
        if not values:
            problems.append(f"no {tool} output with {name}")
        elif not any(_states_field(answer, tool, name, v) for v in values):
            problems.append(f"{spec.tool_result} {values[0]!r} not stated")
    if spec.mentions_error and not any(p in answer.lower() for p in ERROR_PHRASES):
        problems.append("does not say it failed")
    return "; ".join(problems) or None


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile with linear interpolation between ranks (numpy's default); None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class TurnScore:
    """The verdicts on one turn. ``args`` holds (tool, problem or None) for each scored tool."""

    tool_ok: bool
    args: tuple[tuple[str, str | None], ...]
    answer_checked: bool
    answer_problem: str | None

    @property
    def answer_ok(self) -> bool | None:
        return (self.answer_problem is None) if self.answer_checked else None

    @property
    def failed(self) -> bool:
        return not self.tool_ok or any(p is not None for _, p in self.args) or self.answer_ok is False


def score_turn(record: TurnRecord) -> TurnScore:
    expected = record.expected
    args: list[tuple[str, str | None]] = []
    for tool, spec in expected.args.items():
        calls = [c for c in record.calls if c.name == tool]
        if not calls:
            continue
        problems = [check_arguments(tool, spec, c.arguments()) for c in calls]
        args.append((tool, None if None in problems else problems[0]))
    answer_problem: str | None = None
    if expected.answer is not None:
        answer_problem = (
            f"turn failed: {record.error}"
            if record.error
            else check_answer(expected.answer, record.answer, record.calls)
        )
    return TurnScore(
        tool_ok=not record.error and tool_set_match(expected.tools, record.tools_called),
        args=tuple(args),
        answer_checked=expected.answer is not None,
        answer_problem=answer_problem,
    )


# -------------------------------------------------------------------------------------------- running


class _StreamEnded(Exception):
    """The server closed the Converse stream before the turn completed."""


def selection_name(value: agent_pb2.ToolSelection.ValueType) -> str:
    """TOOL_SELECTION_EMBEDDING → "embedding" (a number this build does not know stays readable)."""
    try:
        return agent_pb2.ToolSelection.Name(value).removeprefix("TOOL_SELECTION_").lower()
    except ValueError:
        return f"value {value}"


async def _run_turn(call: Any, record: TurnRecord, session_id: str) -> None:
    start = agent_pb2.StartTurn(session_id=session_id, message=record.message)
    sent = time.perf_counter()
    await call.write(agent_pb2.ConverseRequest(start_turn=start))
    by_id: dict[str, ToolCall] = {}
    while True:
        event = await call.read()
        if event is grpc.aio.EOF:
            raise _StreamEnded("the stream ended before TurnCompleted")
        kind = event.WhichOneof("event")
        if kind == "turn_accepted":
            record.session_id = event.turn_accepted.session_id
        elif kind == "text_delta" and event.text_delta.text:
            if record.ttft_client_s is None:
                record.ttft_client_s = time.perf_counter() - sent
            record.answer += event.text_delta.text
        elif kind == "tool_call_started":
            started = event.tool_call_started
            by_id[started.call_id] = ToolCall(started.call_id, started.tool_name, started.arguments_json)
            record.calls.append(by_id[started.call_id])
        elif kind == "tool_call_finished":
            finished = event.tool_call_finished
            tool_call = by_id.get(finished.call_id)
            if tool_call is None:  # a finish without a start is still a call the turn made
                tool_call = ToolCall(finished.call_id, finished.tool_name, "")
                record.calls.append(tool_call)
            tool_call.status = common_pb2.ToolCallStatus.Name(finished.status).removeprefix("TOOL_CALL_STATUS_")
            tool_call.output_json = finished.output_json
            tool_call.error_message = finished.error_message
        elif kind == "turn_completed":
            completed = event.turn_completed
            record.latency_s = time.perf_counter() - sent
            record.generations = completed.generations
            record.tool_selection = selection_name(completed.tool_selection)
            record.cached = completed.cached
            record.planning_s = completed.timings.planning.ToNanoseconds() / 1e9
            if record.answer:
                record.ttft_server_s = completed.time_to_first_token.ToNanoseconds() / 1e9
            return


async def run_case(
    stub: Any, case: Case, mode: str, *, turn_timeout_s: float = DEFAULT_TURN_TIMEOUT_S
) -> list[TurnRecord]:
    """Every turn of ``case`` on one Converse stream, in one session (the id TurnAccepted gave)."""
    records = [TurnRecord(case.id, case.category, case.split, mode, i, turn) for i, turn in enumerate(case.turns, 1)]
    call: Any = stub.Converse(metadata=((TENANT_HEADER, EVAL_TENANT),))
    session_id = ""
    try:
        for record in records:
            try:
                async with asyncio.timeout(turn_timeout_s):
                    await _run_turn(call, record, session_id)
            except TimeoutError:
                record.error = f"no TurnCompleted within {turn_timeout_s:g} s"
            except grpc.aio.AioRpcError as exc:
                record.error = f"{exc.code().name}: {exc.details()}"
            except _StreamEnded as exc:
                record.error = str(exc)
            if record.error:  # the stream is unusable and the session incomplete: later turns cannot run
                for later in records[record.turn_index :]:
                    later.error = "not run: an earlier turn of the session failed"
                break
            session_id = record.session_id
        else:
            await call.done_writing()
            with contextlib.suppress(TimeoutError, grpc.aio.AioRpcError):
                await asyncio.wait_for(call.code(), 10)
    finally:
        call.cancel()
    return records


@dataclass
class Report:
    """Every turn record of a run, and the summaries computed from them."""

    modes: tuple[str, ...]
    splits: tuple[str, ...]
    cases: dict[str, int]
    records: list[TurnRecord]

    def select(self, mode: str | None = None, split: str | None = None) -> list[TurnRecord]:
        return [r for r in self.records if (mode is None or r.mode == mode) and (split is None or r.split == split)]

    def turns(self, split: str) -> int:
        """Turns per mode in ``split`` (each mode runs every turn)."""
        return len(self.select(self.modes[0], split)) if self.modes else 0

    def summary(self, mode: str, split: str) -> Summary:
        return summarise(self.select(mode, split))

    def failures(self, split: str) -> list[tuple[TurnRecord, TurnScore]]:
        scored = [(r, score_turn(r)) for r in self.select(split=split)]
        failed = [(r, s) for r, s in scored if s.failed or r.error]
        return sorted(failed, key=lambda rs: (rs[0].case_id, rs[0].turn_index, self.modes.index(rs[0].mode)))


async def run_eval(
    cases: Sequence[Case],
    stubs: Mapping[str, Any],
    *,
    turn_timeout_s: float = DEFAULT_TURN_TIMEOUT_S,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Run every case under every mode, one at a time, interleaved per case.

    Case 1 runs under the first mode then the second, case 2 the other way
    round, and so on: warm-up, background load and thermal drift hit every
    mode alike. Each case gets a fresh session per mode.
    """
    modes = tuple(stubs)
    records: list[TurnRecord] = []
    total = sum(len(c.turns) for c in cases) * len(modes)
    for i, case in enumerate(cases):
        for mode in modes if i % 2 == 0 else modes[::-1]:
            for record in await run_case(stubs[mode], case, mode, turn_timeout_s=turn_timeout_s):
                records.append(record)
                if progress is not None:
                    progress(f"[{len(records):>{len(str(total))}}/{total}] {progress_line(record)}")
    splits = tuple(dict.fromkeys(c.split for c in cases))
    return Report(modes, splits, dict(Counter(c.split for c in cases)), records)


def progress_line(record: TurnRecord) -> str:
    """One line per turn, free of the message and the answer (held-out prompts stay unseen)."""
    score = score_turn(record)
    mark = {True: "ok", False: "FAIL", None: "-"}
    args_ok = None if not score.args else all(p is None for _, p in score.args)
    latency = "-" if record.latency_s is None else f"{record.latency_s:.1f}s"
    line = (
        f"{record.case_id}#{record.turn_index} {record.mode}: tools={','.join(sorted(record.tools_called)) or '-'}"
        f" choice={mark[score.tool_ok]} args={mark[args_ok]} answer={mark[score.answer_ok]}"
        f" selection={record.tool_selection} generations={record.generations} {latency}"
    )
    return line + (f" error={record.error}" if record.error else "")


# -------------------------------------------------------------------------------------------- summary


@dataclass(frozen=True)
class Ratio:
    hits: int
    total: int

    @property
    def value(self) -> float | None:
        return self.hits / self.total if self.total else None

    def __str__(self) -> str:
        return f"{self.hits}/{self.total} ({100 * self.hits / self.total:.1f} %)" if self.total else "–"


@dataclass(frozen=True)
class Summary:
    """One mode on one split. Latencies are seconds; None where no turn qualified."""

    turns: int
    errors: int
    tool_choice: Ratio
    arguments: Ratio
    answers: Ratio
    generations_mean: float | None
    single_tool_generations_mean: float | None
    single_tool_generations_max: int | None
    selection: dict[str, int]
    ttft_client_p50: float | None
    ttft_client_p95: float | None
    ttft_server_p50: float | None
    ttft_server_p95: float | None
    latency_p50: float | None
    latency_p95: float | None
    single_tool_latency_p50: float | None
    planning_p50: float | None
    by_category: dict[str, Ratio]


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarise(records: Sequence[TurnRecord]) -> Summary:
    """Accuracy, cost and latency of a set of turns (those of one mode and split).

    Single-tool turns are those *expected* to call exactly one tool, so both
    modes are measured on the same turns whatever they chose.
    """
    scores = [score_turn(r) for r in records]
    arg_checks = [p for s in scores for _, p in s.args]
    answered = [s.answer_ok for s in scores if s.answer_ok is not None]
    done = [r for r in records if not r.error]
    single = [r for r in done if len(r.expected.tools) == 1]
    ttft_client = [r.ttft_client_s for r in done if r.ttft_client_s is not None]
    ttft_server = [r.ttft_server_s for r in done if r.ttft_server_s is not None]
    latencies = [r.latency_s for r in done if r.latency_s is not None]
    single_latencies = [r.latency_s for r in single if r.latency_s is not None]
    categories: dict[str, list[bool]] = {}
    for r, s in zip(records, scores, strict=True):
        categories.setdefault(r.category, []).append(s.tool_ok)
    return Summary(
        turns=len(records),
        errors=sum(1 for r in records if r.error),
        tool_choice=Ratio(sum(s.tool_ok for s in scores), len(scores)),
        arguments=Ratio(sum(p is None for p in arg_checks), len(arg_checks)),
        answers=Ratio(sum(answered), len(answered)),
        generations_mean=_mean([r.generations for r in done]),
        single_tool_generations_mean=_mean([r.generations for r in single]),
        single_tool_generations_max=max((r.generations for r in single), default=None),
        selection=dict(Counter(r.tool_selection for r in done).most_common()),
        ttft_client_p50=percentile(ttft_client, 50),
        ttft_client_p95=percentile(ttft_client, 95),
        ttft_server_p50=percentile(ttft_server, 50),
        ttft_server_p95=percentile(ttft_server, 95),
        latency_p50=percentile(latencies, 50),
        latency_p95=percentile(latencies, 95),
        single_tool_latency_p50=percentile(single_latencies, 50),
        planning_p50=percentile([r.planning_s for r in done if r.planning_s is not None], 50),
        by_category={c: Ratio(sum(v), len(v)) for c, v in sorted(categories.items(), key=_category_order)},
    )


def _category_order(item: tuple[str, Any]) -> int:
    return CATEGORIES.index(item[0]) if item[0] in CATEGORIES else len(CATEGORIES)


# --------------------------------------------------------------------------------------------- report


@dataclass(frozen=True)
class RunInfo:
    """Where and how a run happened, for the report's header."""

    command: str
    date: str
    machine: str
    model: str


SPLIT_TITLES = {"heldout": "Held-out split (headline)", "dev": "Dev split (tuned on)"}


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f} s"


def _number(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _pair(a: float | None, b: float | None) -> str:
    return f"{_seconds(a)} / {_seconds(b)}"


def _single_tool_generations(summary: Summary) -> str:
    most = "–" if summary.single_tool_generations_max is None else str(summary.single_tool_generations_max)
    return f"{_number(summary.single_tool_generations_mean)} / {most}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _split_section(report: Report, split: str) -> list[str]:
    modes = report.modes
    s = {mode: report.summary(mode, split) for mode in modes}
    rows: list[tuple[str, Callable[[Summary], str]]] = [
        ("tool choice (exact set)", lambda x: str(x.tool_choice)),
        ("arguments exact (expected tool called)", lambda x: str(x.arguments)),
        ("answer correct (checkable turns)", lambda x: str(x.answers)),
        ("turns that errored", lambda x: str(x.errors)),
        ("generations per turn, mean", lambda x: _number(x.generations_mean)),
        ("single-tool turns: generations mean / max", _single_tool_generations),
        ("tool selection decided by", lambda x: ", ".join(f"{k} {v}" for k, v in x.selection.items()) or "–"),
        ("TTFT client p50 / p95", lambda x: _pair(x.ttft_client_p50, x.ttft_client_p95)),
        ("TTFT server p50 / p95", lambda x: _pair(x.ttft_server_p50, x.ttft_server_p95)),
        ("turn latency p50 / p95", lambda x: _pair(x.latency_p50, x.latency_p95)),
        ("single-tool turn latency p50", lambda x: _seconds(x.single_tool_latency_p50)),
        ("planning time p50 (selection + arguments)", lambda x: _seconds(x.planning_p50)),
    ]
    lines = [f"## {SPLIT_TITLES.get(split, split)}", ""]
    lines.append(f"{report.cases.get(split, 0)} cases, {report.turns(split)} turns per mode.")
    lines.append("")
    lines += _table(["metric", *modes], [[name, *(f(s[m]) for m in modes)] for name, f in rows])
    if len(modes) == 2:
        a, b = (s[m].single_tool_latency_p50 for m in modes)
        ratio = "–" if a is None or not b else f"{a / b:.2f}"
        lines += ["", f"Single-tool turn latency p50, {modes[0]} ÷ {modes[1]}: **{ratio}**"]
    lines += ["", "Tool choice by category:", ""]
    categories = list(dict.fromkeys(c for m in modes for c in s[m].by_category))
    lines += _table(
        ["category", *modes],
        [[c, *(str(s[m].by_category.get(c, Ratio(0, 0))) for m in modes)] for c in categories],
    )
    return [*lines, ""]


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[: EXCERPT_CHARS - 1] + "…"


def _calls_text(record: TurnRecord, redact: bool) -> str:
    if not record.calls:
        return "none"
    if redact:
        return ", ".join(c.name for c in record.calls)
    return ", ".join(
        f"{c.name} {c.arguments_json} → {c.status or 'unfinished'}"
        + (f" ({_excerpt(c.error_message)})" if c.error_message else "")
        for c in record.calls
    )


def _failure(record: TurnRecord, score: TurnScore, redact: bool) -> list[str]:
    expected = ", ".join(sorted(record.expected.tools)) or "none"
    title = f"- **{record.case_id}** turn {record.turn_index}, {record.mode} ({record.category})"
    lines = [title if redact else f'{title}: "{record.message}"']
    lines.append(f"  - tools: expected {expected}; got {_calls_text(record, redact)}")
    for tool, problem in score.args:
        if problem is not None:
            lines.append(f"  - arguments of {tool}: {'wrong' if redact else problem}")
    if score.answer_ok is False:
        lines.append(f"  - answer: {'wrong' if redact else score.answer_problem}")
    if record.error:
        lines.append(f"  - error: {record.error}")
    if not redact and record.answer:
        lines.append(f"  - answer excerpt: {_excerpt(record.answer)}")
    return lines


def render_markdown(report: Report, info: RunInfo, *, show_heldout: bool = False) -> str:
    """EVAL.md: the run, the headline split first, then dev, then every failing turn.

    Held-out failures are listed without message, arguments or answer unless
    ``show_heldout``: this file is read by whoever tunes the router, and a
    held-out prompt they have read is no longer held out.
    """
    order = [s for s in ("heldout", "dev") if s in report.splits] + [
        s for s in report.splits if s not in ("heldout", "dev")
    ]
    sizes = ", ".join(f"{s} {report.cases.get(s, 0)} cases / {report.turns(s)} turns" for s in order)
    lines = [
        "# Agent evaluation",
        "",
        f"- Command: `{info.command}`",
        f"- Date: {info.date}",
        f"- Machine: {info.machine}",
        f"- Model: {info.model}",
        f"- Modes compared: {', '.join(report.modes)} (the router's tool selection)",
        f"- Splits: {sizes}",
        "",
        "The router's tool selection was tuned on the **dev** split only; the **held-out** split was written",
        "separately and not shown to whoever tuned it, so its numbers are the headline and dev numbers show fit.",
        "Cases run one at a time; each case runs under every mode back to back, alternating which goes first.",
        "Every case starts a fresh session; follow-up turns continue it. Response caching is off; the modes",
        "share one engine, so a case's second run may reuse vLLM's prefix cache (the alternation spreads that).",
        "",
        "Scoring: tool choice is an exact match of the set of tools called; arguments are compared by meaning",
        "(the expression's value, units after the tool's alias table, the time zone, a shared keyword, the URL);",
        "answers are checked only where a fact is checkable (a number within 0.1 %, a word, the tool's own",
        "output such as the clock's HH:MM, or saying that it failed). TTFT client: StartTurn sent → first",
        "text; TTFT server: the router's own figure; latency: StartTurn sent → TurnCompleted.",
        "",
    ]
    for split in order:
        lines += _split_section(report, split)
    lines += ["## Failing turns", ""]
    for split in order:
        failures = report.failures(split)
        redact = split == "heldout" and not show_heldout
        note = " (messages, arguments and answers withheld: this split must stay unseen)" if redact else ""
        lines += [f"### {split}: {len(failures)} failing turns{note}", ""]
        for record, score in failures:
            lines += _failure(record, score, redact)
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
