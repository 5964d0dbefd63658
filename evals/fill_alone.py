"""The fill alone: ``python -m evals.fill_alone``, each one-tool ask filled for its right tool, on the engine.

Argument exactness in the served eval is counted only where the chain chose
the right tool, and a wrong choice upstream changes which turns it counts. To
read the fill by itself, this gives every first turn of a ``single`` case
that expects one tool described only its expected tool and runs the router's
own ``Filler`` on it (the fill prompt, the narrowed grammar, the completion
and grounding, greedy) on the embedded model through vLLM, with no mesh: a
generation goes to the engine directly. It reports how many calls come out
exact (every expected argument, ``check_generic``), how many the fill dropped
(unparseable or ungrounded), and, beside it, the same prompt generated under
the tool's own schema, not narrowed ("free"): what the narrowing is worth.
Counts only, so it may run on a held-out split. About four minutes for 200
turns on this CPU, the engine's start included.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncGenerator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from agentmesh.common.v1 import common_pb2
from evals.arguments import check_generic
from evals.cases import Case, load_split
from evals.catalog import GENERALITY_DIR, catalog_specs, load_catalog
from services.inference.config import default_model_dir
from services.inference.engine import ChatTurn, GenerationRequest, Sampling
from services.inference.vllm_engine import VllmEngine, VllmSettings
from services.router.planning.fill import Filler
from services.router.planning.inputs import PlanInput
from services.router.planning.prompts import fill_messages, parse_arguments
from services.router.planning.structured import Structured
from services.router.replicas.generation import GenerationDone, GenerationEvent, GenerationSpec, Generator
from services.router.turn.progress import TurnCounters
from services.runtime.language import ENGLISH

#: How many fills run at once (the engine batches them).
CONCURRENCY = 8
#: The token limit of each fill and of the "free" generation beside it (the router's fill default).
FILL_TOKENS = 160


class EngineGenerator:
    """The router's generator interface over an engine in this process (no replica, no gRPC): what the
    planning code calls, so the fill runs unchanged."""

    def __init__(self, engine: VllmEngine) -> None:
        self._engine = engine
        self._next = 0

    async def stream(self, spec: GenerationSpec) -> AsyncGenerator[GenerationEvent, None]:
        self._next += 1
        request_id = f"fill-{self._next}"
        request = GenerationRequest(
            request_id=request_id,
            prompt=tuple(ChatTurn(m.role, m.content) for m in spec.messages),
            sampling=Sampling(0.0, 1.0, 0, spec.sampling.max_tokens or FILL_TOKENS, None, ()),
            priority=0,
            json_schema=spec.json_schema or None,
        )
        async for update in self._engine.generate(self._engine.prepare(request), request_id):
            if update.text:
                yield GenerationEvent(text=update.text)
        yield GenerationEvent(done=GenerationDone(common_pb2.Usage(), common_pb2.FINISH_REASON_STOP, 0.0, "", ""))


def one_tool_asks(cases: Sequence[Case], described: set[str]) -> list[tuple[str, str, dict[str, object]]]:
    """(message, tool, expected arguments) of each single case's first turn that expects one described tool."""
    out = []
    for case in cases:
        turn = case.turns[0]
        if case.category == "single" and len(turn.tools) == 1:
            (tool,) = turn.tools
            if tool in described and turn.args.get(tool):
                out.append((turn.message, tool, dict(turn.args[tool])))
    return out


async def measure(cases: Sequence[Case], catalog: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """Counts: asks, exact fills, dropped fills, and exact "free" generations (the tool's own schema)."""
    specs = {spec.name: spec for spec in catalog_specs(catalog)}
    asks = one_tool_asks(cases, set(specs))
    engine = VllmEngine(VllmSettings(model=str(default_model_dir()), model_id="fill-alone", warmup=False))
    await engine.start()
    structured = Structured(cast(Generator, EngineGenerator(engine)))  # the planning code's own call path
    filler = Filler(structured, ENGLISH, max_tokens=FILL_TOKENS)
    gate = asyncio.Semaphore(CONCURRENCY)
    counts = {"asks": len(asks), "exact": 0, "dropped": 0, "free exact": 0}

    async def one(message: str, tool: str, expected: dict[str, object]) -> None:
        turn = PlanInput(message, "auto", "", common_pb2.PRIORITY_P1)
        async with gate:
            calls = await filler.fill([specs[tool]], [tool], {}, turn, TurnCounters())
            free = await structured(
                fill_messages(specs[tool], message, "", []),
                specs[tool].parameters_json_schema,
                common_pb2.PRIORITY_P1,
                TurnCounters(),
                FILL_TOKENS,
            )
        if not calls:
            counts["dropped"] += 1
        elif check_generic(expected, calls[0].arguments) is None:
            counts["exact"] += 1
        written = parse_arguments(free)
        if written is not None and check_generic(expected, written) is None:
            counts["free exact"] += 1

    try:
        await asyncio.gather(*(one(*ask) for ask in asks))
    finally:
        await engine.close()
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.fill_alone", description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", default="dev")
    parser.add_argument("--cases", type=Path, action="append", help="a folder of <split>.jsonl; repeat to pool")
    args = parser.parse_args(argv)
    catalog = load_catalog()
    cases = [c for folder in args.cases or [GENERALITY_DIR] for c in load_split(args.split, folder, catalog)]
    counts = asyncio.run(measure(cases, catalog))
    n = counts["asks"]
    print(f"one-tool asks filled for their tool: {n}")
    print(
        f"  exact (the router's fill): {counts['exact']}/{n}   dropped (unparseable or ungrounded): {counts['dropped']}"
    )
    print(f"  exact, the tool's own schema not narrowed: {counts['free exact']}/{n}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
