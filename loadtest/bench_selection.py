"""Tool selection at scale: 5, 50 and 200 tools loaded — embedding, candidates and the judges that need no model.

``python -m loadtest.bench_selection`` loads the built-ins plus description-only
tools (the generality catalog, and past its 62 tools the same tools namespaced
per region, as several MCP servers of one kind would list them) into a card
index with the real sentence embedder, then times, per message of the
generality dev split: the candidates stage (the message, its clauses and its
follow-up text embedded and scored) and the similarity, schema and classifier
judges. The LLM judge is left out: it is a generation, measured in EVAL.md.
Also: the cold load (every card embedded, classifier fitted), the reload after
one tool changed (only its cards embedded again), and the memory the index
holds (its arrays, and the process's RSS growth).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import resource
import sys
import time
from collections.abc import Sequence
from typing import Any

from agentmesh.common.v1 import common_pb2
from evals.cases import load_cases
from evals.catalog import GENERALITY_DIR, load_catalog
from services.router.planning.candidates import CardIndex
from services.router.planning.embedding import MiniLmEmbedder
from services.router.planning.inputs import PlanInput
from services.router.planning.judges import Judge, advance, start
from services.router.planning.judges.classifier import ClassifierJudge
from services.router.planning.judges.schema import SchemaJudge
from services.router.planning.judges.similarity import SimilarityJudge
from services.router.planning.planner import scored_ask
from services.router.planning.settings import SelectorSettings
from services.router.turn.progress import TurnCounters
from services.tools.builtin import default_tools
from services.tools.convert import spec_to_proto

REGIONS = ("eu", "us", "apac")


def tool_list(count: int, catalog: dict[str, dict[str, Any]]) -> list[common_pb2.ToolSpec]:
    """The built-ins, then catalog tools, then the catalog namespaced per region, up to ``count`` tools."""
    specs = [spec_to_proto(t) for t in default_tools()]
    extra: list[common_pb2.ToolSpec] = []
    for region in ("", *REGIONS):
        for name, tool in catalog.items():
            suffix = f" ({region.upper()} region)" if region else ""
            extra.append(
                common_pb2.ToolSpec(
                    name=f"{region}__{name}" if region else name,
                    description=tool["description"] + suffix,
                    parameters_json_schema=json.dumps(tool["parameters"]),
                )
            )
    return [*specs, *extra][:count]


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def measure(count: int, messages: Sequence[str], embedder: MiniLmEmbedder, rounds: int) -> dict[str, Any]:
    catalog = load_catalog()
    specs = tool_list(count, catalog)
    settings = SelectorSettings()
    index = CardIndex(embedder, settings)
    gc.collect()
    rss_before = _rss_mb()
    started = time.perf_counter()
    await index.load(specs)
    cold_s = time.perf_counter() - started
    changed = list(specs)
    last = changed[-1]
    changed[-1] = common_pb2.ToolSpec(
        name=last.name, description=last.description + " Updated.", parameters_json_schema=last.parameters_json_schema
    )
    started = time.perf_counter()
    await index.load(changed)
    reload_s = time.perf_counter() - started
    cards = index.cards
    assert cards is not None
    array_mb = (cards.positives.nbytes + cards.negatives.nbytes + cards.rivals.nbytes) / 2**20
    if cards.classifier is not None:
        array_mb += cards.classifier.weights.nbytes / 2**20
    judges: list[Judge] = [SimilarityJudge(settings), SchemaJudge(settings), ClassifierJudge(settings)]
    times: list[float] = []
    for _ in range(rounds):
        for message in messages:
            turn = PlanInput(message, "auto", "", common_pb2.PRIORITY_P1)
            began = time.perf_counter()
            ask = await scored_ask(index, changed, turn, TurnCounters())
            await advance(judges, ask, start(ask))
            times.append(time.perf_counter() - began)
    return {
        "tools": len(specs),
        "card_texts": len(cards.owner),
        "cold_load_s": cold_s,
        "reload_one_changed_s": reload_s,
        "p50_ms": 1000 * _percentile(times, 50),
        "p99_ms": 1000 * _percentile(times, 99),
        "messages": len(times),
        "index_arrays_mb": array_mb,
        "rss_growth_mb": _rss_mb() - rss_before,
    }


async def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_selection", description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="5,50,200", help="tool-list sizes (default 5,50,200)")
    parser.add_argument("--rounds", type=int, default=2, help="passes over the messages per size")
    args = parser.parse_args(argv)
    catalog = load_catalog()
    messages = [t.message for c in load_cases(["dev"], GENERALITY_DIR, catalog) for t in c.turns]
    embedder = MiniLmEmbedder()
    await embedder.warm_up()
    print("| tools | card texts | selection p50 | p99 | cold load | reload, one changed | index arrays | RSS growth |")
    print("|---|---|---|---|---|---|---|---|")
    for count in (int(c) for c in args.counts.split(",")):
        r = await measure(count, messages, embedder, args.rounds)
        print(
            f"| {r['tools']} | {r['card_texts']} | {r['p50_ms']:.1f} ms | {r['p99_ms']:.1f} ms"
            f" | {r['cold_load_s']:.2f} s | {r['reload_one_changed_s']:.2f} s | {r['index_arrays_mb']:.1f} MB"
            f" | {r['rss_growth_mb']:.0f} MB |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
