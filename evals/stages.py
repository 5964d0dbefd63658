"""Where the turns go, per stage: the judges that need no generation, run over a case split, no engine.

``python -m evals.stages --suite generality --split dev`` loads the built-in
tools (and, for ``generality``, the catalog), embeds their cards as the router
does, and runs every turn through the similarity → schema → classifier →
whether judges.
Each turn lands in one row: decided right, decided wrong, or left to the LLM
judge (with or without the expected tool among its candidates). A follow-up
turn is planned as if the turn before it went as expected (its message and
its expected calls are the previous turn's), so each turn is judged on its own.

Why it exists: an eval run needs the engine and takes minutes; this takes
seconds after the embedder loads, so a change to the judges can be read on the
dev split before the eval measures it, and the per-stage table in EVAL.md is
reproducible. ``--set described_choose=0.5`` overrides one ``SelectorSettings``
field for the run. ``--show`` prints each wrong or undecided turn with its
message and scores — refused on a held-out split, which must stay unseen.

``--no-catalog`` runs the generality cases on the built-ins alone, as the
eval's "catalog not loaded" run does: a turn that expects a catalog tool
expects no tool, so the "decided, wrong" row counts the built-ins taken (by
the judges that need no generation) for asks they do not serve.

``--ranking`` reads the step before the judges, with no threshold at all:
for each first turn that expects one tool, where that tool ranks among all
the loaded tools by its card score (``candidates.CardIndex.score``), with
the word and verb scores and by the cosine alone. Top 1 bounds what any
judge chain that takes the best-ranked tool could choose; top 3 is what the
LLM judge is shown. Counts only, so it may run on a held-out split.

``--separation`` reads whether the card scores, or the ask classifier, tell
the turns the no-generation judges decided with a tool for no ask from those
they decided right (``separation.py``; ``--set whether_floor=0`` reads them
before the whether judge acts): counts and AUCs only.

``--fill`` reads the step after the judges: whether the fill's narrowed
schema offers each argument a first turn expects of a tool described only
(``fill_offers.py``; no judge runs, counts only).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentmesh.common.v1 import common_pb2
from evals.cases import CASES_DIR, Case, load_split
from evals.catalog import GENERALITY_DIR, catalog_tools, load_catalog
from evals.fill_offers import offers, offers_table
from evals.generality import without_catalog
from evals.separation import Judged, separation_table
from services.router.planning.candidates import CardIndex
from services.router.planning.embedding import MiniLmEmbedder
from services.router.planning.inputs import PlanInput, restated
from services.router.planning.judges import Decision, Judge, Verdict, advance, start
from services.router.planning.judges.classifier import ClassifierJudge
from services.router.planning.judges.schema import SchemaJudge
from services.router.planning.judges.similarity import SimilarityJudge
from services.router.planning.judges.whether import WhetherJudge
from services.router.planning.no_tool_examples import CAPABILITY_ASKS, NO_TOOL_EXAMPLES
from services.router.planning.planner import scored_ask
from services.router.planning.settings import SelectorSettings
from services.router.turn.progress import TurnCounters
from services.runtime.language import language_for
from services.tools.builtin import default_tools
from services.tools.convert import spec_to_proto

ROWS = (
    "decided, right (tool or no tool)",
    "decided, wrong tool, missed tool or a tool for a near miss",
    "left to the LLM judge, expected tool among its candidates",
    "left to the LLM judge, expected tool not a candidate",
    "left to the LLM judge, no tool expected",
)


@dataclasses.dataclass(frozen=True)
class Landing:
    """One turn's row, and what a reader of a dev split needs to see why."""

    case: str
    turn: int
    row: int
    message: str
    expected: frozenset[str]
    verdict: Verdict
    #: How likely the ask classifier reads the message as an ask (the best of its scored texts).
    asks: float = 1.0


def selector_with(overrides: Sequence[str]) -> SelectorSettings:
    """The default thresholds with ``field=value`` overrides (numbers only); an unknown field is an error."""
    known = {f.name: f for f in dataclasses.fields(SelectorSettings)}
    values: dict[str, float | int] = {}
    for item in overrides:
        name, _, raw = item.partition("=")
        if name not in known or not raw:
            raise SystemExit(f"--set {item!r}: expected FIELD=NUMBER, FIELD one of {', '.join(known)}")
        values[name] = int(raw) if known[name].type in (int, "int") else float(raw)
    return SelectorSettings(**values)  # type: ignore[arg-type]


def row_of(verdict: Verdict, expected: frozenset[str]) -> int:
    """Which ``ROWS`` entry a verdict after the no-generation judges falls in."""
    if verdict.settled:
        chosen = frozenset(verdict.tools) if verdict.decision is Decision.TOOLS else frozenset()
        return 0 if chosen == expected else 1
    if not expected:
        return 4
    open_ = set(verdict.candidates) | {t for _, cands in verdict.undecided for t in cands} | set(verdict.tools)
    return 2 if expected <= open_ else 3


async def loaded_index(specs: Sequence[common_pb2.ToolSpec], selector: SelectorSettings) -> CardIndex:
    """The cards of ``specs`` embedded as the router embeds them (English, the default no-tool examples)."""
    language = language_for("en")
    examples = language.ask_examples()
    index = CardIndex(MiniLmEmbedder(), selector, NO_TOOL_EXAMPLES, language, CAPABILITY_ASKS, ask_examples=examples)
    await index.load(specs)
    return index


async def land(
    cases: Sequence[Case], specs: Sequence[common_pb2.ToolSpec], selector: SelectorSettings
) -> list[Landing]:
    """Every turn of ``cases`` through the no-generation judges."""
    index = await loaded_index(specs, selector)
    language = index.language
    judges: list[Judge] = [
        SimilarityJudge(selector),
        SchemaJudge(selector),
        ClassifierJudge(selector),
        WhetherJudge(selector),
    ]
    out = []
    for case in cases:
        previous_message = ""
        previous_calls: tuple[tuple[str, dict[str, Any]], ...] = ()
        for number, spec in enumerate(case.turns, 1):
            turn = PlanInput(spec.message, "auto", "", common_pb2.PRIORITY_P1, previous_message, "", previous_calls)
            turn = restated(turn, language)
            ask = await scored_ask(index, specs, turn, TurnCounters())
            verdict = await advance(judges, ask, start(ask))
            asks = index.asks.best(t.vector for t in ask.scored) if index.asks else 1.0
            row = row_of(verdict, spec.tools)
            out.append(Landing(case.id, number, row, spec.message, spec.tools, verdict, asks))
            previous_message = spec.message
            previous_calls = tuple((name, dict(args)) for name, args in spec.args.items())
    return out


async def ranked(
    cases: Sequence[Case], specs: Sequence[common_pb2.ToolSpec], selector: SelectorSettings
) -> dict[str, tuple[int, int, int]]:
    """Per scoring ("cosine and words", "cosine alone"): how many first turns that expect one tool rank it first,
    how many among the first three, and how many such turns there are (``--ranking``)."""
    asks = [(c.turns[0].message, next(iter(c.turns[0].tools))) for c in cases if len(c.turns[0].tools) == 1]
    index = await loaded_index(specs, selector)
    cards = index.cards
    assert cards is not None
    out = {}
    for name, settings in (
        ("cosine and words", selector),
        ("cosine alone", dataclasses.replace(selector, described_words=0.0, described_action=0.0)),
    ):
        index.settings = settings
        scores = await index.score([message for message, _ in asks])
        places = [
            sorted(s.per_tool, reverse=True).index(s.per_tool[cards.index(tool)])
            for s, (_, tool) in zip(scores, asks, strict=True)
        ]
        out[name] = (sum(p == 0 for p in places), sum(p < 3 for p in places), len(places))
    return out


def ranking_table(ranks: dict[str, tuple[int, int, int]]) -> str:
    lines = ["| scoring | expected tool first | among the first three |", "|---|---|---|"]
    lines += [f"| {name} | {one}/{n} | {three}/{n} |" for name, (one, three, n) in ranks.items()]
    return "\n".join(lines)


def table(landings: Sequence[Landing]) -> str:
    counts = Counter(landing.row for landing in landings)
    lines = [f"| stage | turns ({len(landings)}) |", "|---|---|"]
    lines += [f"| {row} | {counts[i]} |" for i, row in enumerate(ROWS)]
    return "\n".join(lines)


def shown(landing: Landing) -> str:
    v = landing.verdict
    top = sorted(v.scores.items(), key=lambda kv: -kv[1])[:4]
    got = ",".join(v.tools) if v.decision is Decision.TOOLS else v.decision.value
    return (
        f"{landing.case}#{landing.turn} [{ROWS[landing.row][:22]}] by={v.by or '-'} got={got} "
        f"expected={','.join(sorted(landing.expected)) or 'none'}\n    {landing.message}\n    "
        + " ".join(f"{name}={score:.3f}" for name, score in top)
        + f" none={v.none_score:.3f}"
        + (f" cands={','.join(v.candidates[:4])}" if v.decision is Decision.AMBIGUOUS else "")
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.stages", description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=("builtin", "generality"), default="generality")
    parser.add_argument("--split", default="dev")
    parser.add_argument(
        "--cases",
        type=Path,
        action="append",
        help="the folder holding <split>.jsonl (default: the suite's); repeat it to pool several sets",
    )
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="a SelectorSettings field")
    parser.add_argument("--show", action="store_true", help="print each wrong or undecided turn (dev splits only)")
    parser.add_argument("--ranking", action="store_true", help="where the expected tool ranks, no thresholds")
    parser.add_argument(
        "--separation",
        action="store_true",
        help="whether the card scores tell the turns decided with a tool for no ask from the right ones (AUC)",
    )
    parser.add_argument(
        "--fill", action="store_true", help="whether the fill's narrowed schema offers each expected argument"
    )
    parser.add_argument(
        "--no-catalog",
        action="store_true",
        help="generality: the catalog's prompts on the built-ins alone (a catalog tool expected is no tool)",
    )
    args = parser.parse_args(argv)
    if args.show and args.split != "dev":
        print("--show prints messages: only a dev split may be read", file=sys.stderr)
        return 2
    catalog = load_catalog() if args.suite == "generality" else None
    folders = args.cases or [GENERALITY_DIR if catalog is not None else CASES_DIR]
    cases = [case for folder in folders for case in load_split(args.split, folder, catalog)]
    if args.no_catalog and catalog is None:
        print("--no-catalog: only the generality suite has a catalog to leave out", file=sys.stderr)
        return 2
    if args.no_catalog:
        cases = without_catalog(cases)
    tools = default_tools() + (catalog_tools(catalog) if catalog is not None and not args.no_catalog else [])
    specs = [spec_to_proto(tool) for tool in tools]
    if args.fill:
        print(offers_table(offers(cases, {s.name: s.parameters_json_schema for s in specs if not s.examples})))
        return 0
    if args.ranking:
        print(ranking_table(asyncio.run(ranked(cases, specs, selector_with(args.set)))))
        return 0
    landings = asyncio.run(land(cases, specs, selector_with(args.set)))
    if args.separation:
        described = {spec.name for spec in specs if not spec.examples}
        print(separation_table([Judged(x.verdict, x.expected, x.asks) for x in landings], described))
        return 0
    print(table(landings))
    if args.show:
        for landing in landings:
            if landing.row != 0:
                print(shown(landing))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
