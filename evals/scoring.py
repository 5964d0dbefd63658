"""Scoring a turn: tool choice (an exact set), arguments (``arguments.py``), answers where checkable."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from evals.arguments import ANSWER_REL_TOL, check_arguments, numbers_close
from evals.cases import AnswerSpec, is_number
from evals.records import ToolCall, TurnRecord

#: What an answer says when it relays a failure (an unsupported unit, a host not allowed).
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
    "failed",  # "The http_get tool failed: host 'example.com' is not on the allowlist."
    "not allowed",
    "not on the allowlist",
    "refused",
)

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


def contains_number(text: str, expected: float, rel_tol: float = ANSWER_REL_TOL) -> bool:
    return any(numbers_close(n, expected, rel_tol) for n in extract_numbers(text))


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
    if is_number(value):
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
