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

import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard
from urllib.parse import urlsplit

from services.tools.builtin.kb_search import words

_EVALS = Path(__file__).resolve().parent
CASES_DIR = _EVALS / "cases"
#: Prompts of a tuning session's own (``--cases evals/probes --split dev``): tuned on, like dev.
PROBES_DIR = _EVALS / "probes"
#: Held-out sets each written by a helper that saw neither the router's code nor any other case file, each run
#: once (``--cases evals/blind --split heldout``): never tuned on. ``blind2`` was written after ``blind``'s verdicts
#: had been read, for the next change, and so on.
BLIND_DIRS = tuple(
    _EVALS / name for name in ("blind", "blind2", "blind3", "blind4", "blind5", "blind6", "blind7", "blind8")
)
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
    # The generality eval's (evals/generality): one ask of a catalog tool, one of a built-in.
    "single",
    "builtin",
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


def is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _spellings(value: Any) -> bool:
    return (isinstance(value, str) and bool(value)) or (
        isinstance(value, list) and bool(value) and all(isinstance(v, str) and v for v in value)
    )


def _generic_value(value: Any, declared: Mapping[str, Any]) -> bool:
    """A catalog tool's expected value: a scalar, ``{"any_of": [scalars]}``, ``{"contains": "text"}``, or, for a
    parameter its schema declares an array, a list of scalars (the array's items, in any order)."""
    if isinstance(value, list):
        return declared.get("type") == "array" and bool(value) and all(map(_scalar, value))
    if isinstance(value, dict):
        if set(value) == {"any_of"}:
            return isinstance(value["any_of"], list) and bool(value["any_of"]) and all(map(_scalar, value["any_of"]))
        return set(value) == {"contains"} and isinstance(value["contains"], str) and bool(value["contains"].strip())
    return _scalar(value)


def _scalar(value: Any) -> bool:
    return isinstance(value, (str, bool)) or is_number(value)


def _parse_args(tool: str, spec: Any, where: str, catalog: Mapping[str, Any] | None = None) -> dict[str, Any]:
    if catalog is not None and tool in catalog:
        declared = catalog[tool].get("parameters", {}).get("properties", {})
        if not isinstance(spec, dict) or not spec or not set(spec) <= set(declared):
            raise CaseError(f"{where}: args of {tool} must name some of its parameters {sorted(declared)}")
        if not all(_generic_value(v, declared[k]) for k, v in spec.items()):
            raise CaseError(f"{where}: malformed args of {tool}: {spec!r}")
        return dict(spec)
    if isinstance(spec, dict):  # a list of accepted spellings, written as the catalog's cases write it
        spec = {k: v["any_of"] if isinstance(v, dict) and set(v) == {"any_of"} else v for k, v in spec.items()}
        keywords = spec.get("keywords")
        if tool == "kb_search" and isinstance(keywords, dict) and set(keywords) == {"contains"}:
            spec["keywords"] = [keywords["contains"]]  # "the keywords contain this word", as a free-text field's
        if tool == "kb_search" and isinstance(spec.get("keywords"), list):
            spec["keywords"] = [k.lower() if isinstance(k, str) else k for k in spec["keywords"]]
    if tool not in ARG_FIELDS:
        raise CaseError(f"{where}: args for unknown tool {tool!r}")
    if not isinstance(spec, dict) or set(spec) != ARG_FIELDS[tool]:
        raise CaseError(f"{where}: args of {tool} must have exactly {sorted(ARG_FIELDS[tool])}")
    ok = {
        "calculator": lambda: is_number(spec["result"]),
        "unit_convert": lambda: (
            is_number(spec["value"]) and _spellings(spec["from_unit"]) and _spellings(spec["to_unit"])
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
    if not all(is_number(n) for n in numbers):
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


def parse_case(obj: Any, split: str, where: str, catalog: Mapping[str, Any] | None = None) -> Case:
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
        known = {*ARG_FIELDS, *(catalog or {})}
        if not isinstance(tools, list) or not all(t in known for t in tools) or len(set(tools)) != len(tools):
            raise CaseError(f"{at}: tools must list distinct names of loaded tools (built-ins or the catalog's)")
        args_raw = raw.get("args", {})
        if not isinstance(args_raw, dict) or not set(args_raw) <= set(tools):
            raise CaseError(f"{at}: args may only be given for the expected tools")
        args = {tool: _parse_args(tool, spec, at, catalog) for tool, spec in args_raw.items()}
        answer = _parse_answer(raw["answer"], at) if "answer" in raw else None
        if answer is not None and answer.tool_result and answer.tool_result.split(".")[0] not in tools:
            raise CaseError(f"{at}: tool_result names a tool the turn does not expect")
        turns.append(TurnSpec(message, frozenset(tools), args, answer))
    return Case(case_id, category, split, tuple(turns))


def load_split(split: str, folder: Path = CASES_DIR, catalog: Mapping[str, Any] | None = None) -> list[Case]:
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
        cases.append(parse_case(obj, split, where, catalog))
    return cases


def load_cases(splits: Iterable[str], folder: Path = CASES_DIR, catalog: Mapping[str, Any] | None = None) -> list[Case]:
    """The cases of several splits, split by split; ids must be unique across them. ``catalog`` (tool name →
    description and parameters) admits its tools beside the built-ins, their args compared generically."""
    cases = [case for split in splits for case in load_split(split, folder, catalog)]
    seen = Counter(case.id for case in cases)
    duplicates = sorted(case_id for case_id, n in seen.items() if n > 1)
    if duplicates:
        raise CaseError(f"duplicate case ids: {', '.join(duplicates)}")
    return cases
