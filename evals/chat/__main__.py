"""``python -m evals.chat``: how often the router's plain-chat answers are degenerate, per repetition penalty.

The prompts are everyday chat that needs no tool (``dev.jsonl``, tuned on;
``heldout.jsonl``, never tuned on), in the agent eval's case format. Each
runs as the first turn of a new session through the same in-process mesh as
``make eval`` (``evals/__main__.py``: vLLM on the embedded model, the tool
executor, one router with embedding tool selection and no response cache),
with tool choice auto, as a newcomer's first chat runs; the answer is scored
by ``evals/degenerate.py`` (empty, echo, system prompt recited, loop).

Protocol: every ``--penalties`` value runs on dev (sent as the turn's
``sampling.repetition_penalty``; the rest of the sampling is the router's:
greedy, its max_tokens); the value with the lowest dev rate is chosen (a tie
goes to the smaller penalty, the lesser change to the model's own choices);
only then does held-out run, with no penalty (the baseline) and the chosen one
(``--heldout-all``: every value, the choice already made). Progress lines
show dev answers; held-out answers stay unshown unless ``--show-heldout``.
``--report EVAL.md`` writes the result as one section of that file (replacing
the section an earlier run wrote); ``--answers FILE`` keeps every dev answer
and its verdict as JSON lines (held-out ones too with ``--show-heldout``). The router's default,
``--answer-repetition-penalty``, is what this chose.

Nothing happens at import time (vLLM's engine core re-imports the main module).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import shlex
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentmesh.common.v1 import common_pb2
from evals.__main__ import MODEL_ID, connect_eval_redis, embedded_replica, machine_description, run_cli, start_eval_mesh
from evals.cases import Case, CaseError, load_cases
from evals.degenerate import REASONS, Verdict, judge
from evals.records import TurnRecord
from evals.report import CHAT_BEGIN, CHAT_END
from evals.runner import DEFAULT_TURN_TIMEOUT_S, run_case
from services.router.config import RouterConfig
from services.router.turn.prompt import DEFAULT_SYSTEM_PROMPT

CHAT_DIR = Path(__file__).resolve().parent
DEFAULT_PENALTIES = (1.0, 1.1, 1.15, 1.2, 1.3)
#: The one tool-selection mode the chat runs under: the router's default.
MODE = "embedding"
BEGIN = CHAT_BEGIN
END = CHAT_END


@dataclass(frozen=True)
class ChatArgs:
    penalties: tuple[float, ...]
    limit: int | None
    report: Path | None
    show_heldout: bool
    heldout_all: bool
    concurrency: int
    turn_timeout_s: float
    cases_dir: Path = CHAT_DIR
    answers: Path | None = None


@dataclass
class Scored:
    """One prompt's answer and its verdict (an errored turn counts as degenerate, reason ``error``)."""

    record: TurnRecord
    verdict: Verdict

    @property
    def reasons(self) -> tuple[str, ...]:
        return ("error",) if self.record.error else self.verdict.reasons


@dataclass
class Row:
    """Every prompt of one split at one penalty."""

    split: str
    penalty: float
    scored: list[Scored] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.scored)

    @property
    def degenerate(self) -> int:
        return sum(1 for s in self.scored if s.reasons)

    @property
    def rate(self) -> float:
        return self.degenerate / self.total if self.total else 0.0

    def by_reason(self) -> Counter[str]:
        return Counter(r for s in self.scored for r in s.reasons)

    @property
    def with_tools(self) -> int:
        return sum(1 for s in self.scored if s.record.calls)

    @property
    def mean_latency_s(self) -> float:
        latencies = [s.record.latency_s for s in self.scored if s.record.latency_s is not None]
        return sum(latencies) / len(latencies) if latencies else 0.0


def choose(rows: Sequence[Row]) -> float:
    """The penalty with the lowest rate; a tie goes to the smaller penalty."""
    return min(rows, key=lambda r: (r.degenerate, r.penalty)).penalty


async def run_row(
    stub: Any,
    cases: Sequence[Case],
    split: str,
    penalty: float,
    *,
    concurrency: int,
    turn_timeout_s: float,
    show: bool,
) -> Row:
    """Every case at ``penalty``, ``concurrency`` turns in flight (each its own session)."""
    sampling = common_pb2.SamplingParams(repetition_penalty=penalty)
    gate = asyncio.Semaphore(concurrency)
    row = Row(split, penalty)

    async def one(case: Case) -> Scored:
        async with gate:
            (record,) = await run_case(stub, case, MODE, turn_timeout_s=turn_timeout_s, sampling=sampling)
        scored = Scored(record, judge(record.answer, record.message, DEFAULT_SYSTEM_PROMPT))
        mark = ",".join(scored.reasons) or "ok"
        tools = ",".join(sorted(record.tools_called)) or "-"
        line = f"{split} rp={penalty:g} {record.case_id}: {mark} tools={tools} {record.latency_s or 0:.1f}s"
        if show:
            line += f" | {record.message!r} -> {record.answer[:160]!r}"
        print(line, file=sys.stderr, flush=True)
        return scored

    row.scored = list(await asyncio.gather(*(one(c) for c in cases)))
    return row


def commit_description() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=True, cwd=CHAT_DIR).stdout.strip()

    try:
        head, dirty = git("rev-parse", "--short", "HEAD"), git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head} (with uncommitted changes)" if dirty else head


def render(rows: Sequence[Row], chosen: float, info: dict[str, str]) -> str:
    """The EVAL.md section: how it was run, then one table row per split and penalty."""
    default = RouterConfig().answer_repetition_penalty
    lines = [
        BEGIN,
        "## Plain chat: degenerate answers",
        "",
        "Everyday prompts that need no tool (`evals/chat/`, written for this eval: dev tuned on, held-out not), "
        "each the first turn of a new session through the mesh, tool choice auto; answers greedy with the "
        "router's max_tokens. Degenerate (`evals/degenerate.py`): empty, an echo of the message, the system "
        "prompt recited (8 words in a row), or a loop (a 4-word run 3 times). The penalty is vLLM's "
        "`repetition_penalty`, sent with each turn; the lowest dev rate chose "
        f"**{chosen:g}** (ties to the smaller), then held-out ran. The router's default "
        f"(`--answer-repetition-penalty`) is {default:g}; it applies to answers without tool results only.",
        "",
        f"- command: `{info['command']}`",
        f"- date: {info['date']}; commit: {info['commit']}",
        f"- machine: {info['machine']}",
        f"- model: {info['model']}",
        "",
        "| split | repetition penalty | degenerate | rate | empty | echo | system prompt | loop | error "
        "| turns with a tool | mean turn s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        counts = row.by_reason()
        cells = [str(counts.get(r, 0)) for r in (*REASONS, "error")]
        mark = " (chosen)" if row.penalty == chosen else ""
        lines.append(
            f"| {row.split} | {row.penalty:g}{mark} | {row.degenerate}/{row.total} | {row.rate:.0%} | "
            + " | ".join(cells)
            + f" | {row.with_tools} | {row.mean_latency_s:.1f} |"
        )
    lines += ["", END]
    return "\n".join(lines) + "\n"


def write_section(path: Path, section: str) -> None:
    """Replace the section an earlier run wrote in ``path``, or append it."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if BEGIN in text and END in text:
        before, rest = text.split(BEGIN, 1)
        after = rest.split(END, 1)[1].lstrip("\n")
        text = before + section + ("\n" + after if after else "")
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + section
    path.write_text(text, encoding="utf-8")


def _penalties(text: str) -> tuple[float, ...]:
    try:
        values = tuple(sorted({float(v) for v in text.split(",") if v.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError("comma-separated numbers") from None
    if not values or any(not v > 0 for v in values):
        raise argparse.ArgumentTypeError("comma-separated numbers greater than 0 (1: no penalty)")
    return values


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def parse_args(argv: Sequence[str] | None = None) -> ChatArgs:
    parser = argparse.ArgumentParser(
        prog="python -m evals.chat",
        description="Degenerate plain-chat answers per repetition penalty, on the embedded model through the mesh.",
    )
    parser.add_argument(
        "--penalties",
        type=_penalties,
        default=DEFAULT_PENALTIES,
        help=f"repetition penalties to try on dev (default: {','.join(f'{p:g}' for p in DEFAULT_PENALTIES)})",
    )
    parser.add_argument("--limit", type=_positive_int, help="only the first N prompts of each split")
    parser.add_argument("--report", type=Path, help="write the result as a section of this file (e.g. EVAL.md)")
    parser.add_argument("--show-heldout", action="store_true", help="show held-out answers in the progress lines")
    parser.add_argument(
        "--heldout-all", action="store_true", help="run held-out at every penalty, not only 1 and the chosen one"
    )
    parser.add_argument("--concurrency", type=_positive_int, default=4, help="turns in flight (default: 4)")
    parser.add_argument("--turn-timeout-s", type=float, default=DEFAULT_TURN_TIMEOUT_S)
    parser.add_argument("--cases", type=Path, default=CHAT_DIR, help="folder with dev.jsonl and heldout.jsonl")
    parser.add_argument("--answers", type=Path, help="write the dev answers and their verdicts here (JSON lines)")
    ns = parser.parse_args(argv)
    return ChatArgs(
        ns.penalties,
        ns.limit,
        ns.report,
        ns.show_heldout,
        ns.heldout_all,
        ns.concurrency,
        ns.turn_timeout_s,
        ns.cases,
        ns.answers,
    )


def write_answers(path: Path, rows: Sequence[Row], *, heldout: bool) -> None:
    """Each answer with its verdict, one JSON object a line (held-out rows only when ``heldout``)."""
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            if row.split == "heldout" and not heldout:
                continue
            for s in row.scored:
                entry = {
                    "split": row.split,
                    "repetition_penalty": row.penalty,
                    "id": s.record.case_id,
                    "message": s.record.message,
                    "answer": s.record.answer,
                    "reasons": list(s.reasons),
                    "tools": sorted(s.record.tools_called),
                }
                out.write(json.dumps(entry, ensure_ascii=False) + "\n")


async def run(args: ChatArgs, argv: Sequence[str]) -> int:
    try:
        splits = {split: load_cases((split,), args.cases_dir)[: args.limit] for split in ("dev", "heldout")}
    except (CaseError, OSError) as exc:
        print(f"evals.chat: error: {exc}", file=sys.stderr)
        return 2
    redis = await connect_eval_redis("evals.chat")
    if redis is None:
        return 1
    common: dict[str, Any] = {"concurrency": args.concurrency, "turn_timeout_s": args.turn_timeout_s}
    date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    rows: list[Row] = []
    try:
        async with embedded_replica() as inference:
            mesh = await start_eval_mesh(redis, inference, (MODE,))
            stub = mesh.stubs[MODE]
            try:
                for penalty in args.penalties:
                    rows.append(await run_row(stub, splits["dev"], "dev", penalty, show=True, **common))
                chosen = choose(rows)
                print(f"evals.chat: chosen on dev: repetition_penalty {chosen:g}", file=sys.stderr, flush=True)
                held = args.penalties if args.heldout_all else tuple(sorted({1.0, chosen}))
                for penalty in held:
                    row = await run_row(stub, splits["heldout"], "heldout", penalty, show=args.show_heldout, **common)
                    rows.append(row)
            finally:
                await mesh.close()
    finally:
        await redis.aclose()
    info = {
        "command": shlex.join(["python", "-m", "evals.chat", *argv]),
        "date": date,
        "commit": commit_description(),
        "machine": machine_description(),
        "model": f"{MODEL_ID} (embedded), vLLM on CPU, greedy decoding (temperature 0), {args.concurrency} in flight",
    }
    section = render(rows, chosen, info)
    print(section)
    if args.report is not None:
        write_section(args.report, section)
        print(f"wrote {args.report}", file=sys.stderr)
    if args.answers is not None:
        write_answers(args.answers, rows, heldout=args.show_heldout)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_cli(run, parse_args, argv)


if __name__ == "__main__":
    sys.exit(main())
