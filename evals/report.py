"""EVAL.md from a run: the headline held-out split first, failures listed (held-out ones redacted unless asked)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from evals.records import TurnRecord
from evals.scoring import TurnScore
from evals.summary import Ratio, Report, Summary

EXCERPT_CHARS = 200
#: Where the plain-chat section ``python -m evals.chat`` writes into the report begins and ends (``python -m
#: evals`` keeps it when it rewrites the report).
CHAT_BEGIN = "<!-- evals.chat: begin (written by python -m evals.chat) -->"
CHAT_END = "<!-- evals.chat: end -->"

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
        ("no-tool turns that ran a tool", lambda x: str(x.false_positives)),
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


def render_markdown(
    report: Report, info: RunInfo, *, show_heldout: bool = False, title: str = "Agent evaluation", about: str = ""
) -> str:
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
        f"# {title}",
        "",
        *([about, ""] if about else []),
        f"- Command: `{info.command}`",
        f"- Date: {info.date}",
        f"- Machine: {info.machine}",
        f"- Model: {info.model}",
        f"- Modes compared: {', '.join(report.modes)} (the router's tool selection)",
        f"- Splits: {sizes}",
        "",
        "The router's tool selection was tuned on the **dev** split and on the tuning sessions' own prompts, never on",
        "the **held-out** split, which was written separately and not shown to whoever tuned it, so its numbers are",
        "the headline and dev numbers show fit.",
        "",
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
