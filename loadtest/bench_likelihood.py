"""What the likelihood judge costs a turn: five scorings beside the one constrained generation it precedes.

``python -m loadtest.bench_likelihood`` starts the vLLM engine on the embedded
model in-process and, for each single ask of the generality dev split, takes
the five best-ranked tools by card score (as the judge does) and times, in
alternation: the five scorings run concurrently (``SubmitGeneration.scoring``:
each reads the tool's prompt and the message, prompt log-probabilities on, so
no prefix cache is read) and one greedy constrained generation of the LLM
judge's size (48 tokens at most under a one-tool call schema). No gRPC: the
engine alone, so the figures are the model's cost, not the mesh's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid

from evals.cases import load_split
from evals.catalog import GENERALITY_DIR, catalog_tools, load_catalog
from evals.stages import loaded_index, selector_with
from services.inference.config import default_model_dir
from services.inference.engine import ChatTurn, GenerationRequest, Sampling
from services.inference.vllm_engine import VllmEngine, VllmSettings
from services.router.planning.prompts import request_messages
from services.tools.builtin import default_tools
from services.tools.convert import spec_to_proto

GREEDY = Sampling(temperature=0.0, top_p=1.0, top_k=0, max_tokens=48, seed=None, stop=())
SCHEMA = json.dumps(
    {
        "type": "object",
        "properties": {"tool": {"enum": ["none", "candidate"]}, "reason": {"type": "string", "maxLength": 80}},
        "required": ["tool"],
    }
)


async def run(engine: VllmEngine, request: GenerationRequest) -> float:
    started = time.perf_counter()
    async for _ in engine.generate(engine.prepare(request), uuid.uuid4().hex):
        pass
    return time.perf_counter() - started


async def main(limit: int) -> None:
    catalog = load_catalog()
    specs = [spec_to_proto(t) for t in default_tools() + catalog_tools(catalog)]
    by_name = {s.name: s for s in specs}
    index = await loaded_index(specs, selector_with([]))
    cards = index.cards
    assert cards is not None
    cases = load_split("dev", GENERALITY_DIR, catalog)
    asks = [c.turns[0].message for c in cases if len(c.turns[0].tools) == 1][:limit]
    engine = VllmEngine(VllmSettings(model=default_model_dir(), model_id="SmolLM2-135M-Instruct"))
    await engine.start()
    scorings: list[float] = []
    generations: list[float] = []
    try:
        for n, (message, score) in enumerate(zip(asks, await index.score(asks), strict=True)):
            top = [cards.tools[i] for i in score.per_tool.argsort()[::-1][:5]]
            batch = [
                GenerationRequest(
                    request_id=uuid.uuid4().hex,
                    prompt=tuple(ChatTurn(m.role, m.content) for m in request_messages(by_name[name])),
                    sampling=GREEDY,
                    priority=1,
                    add_generation_prompt=True,
                    continuation=message,
                )
                for name in top
            ]
            judge = GenerationRequest(
                request_id=uuid.uuid4().hex,
                prompt=(ChatTurn("user", f"{by_name[top[0]].description}\nRequest: {message}\nWhich tool?"),),
                sampling=GREEDY,
                priority=1,
                json_schema=SCHEMA,
            )

            async def five(batch: list[GenerationRequest] = batch) -> float:
                started = time.perf_counter()
                await asyncio.gather(*(run(engine, r) for r in batch))
                return time.perf_counter() - started

            if n % 2:  # alternate which goes first
                generations.append(await run(engine, judge))
                scorings.append(await five())
            else:
                scorings.append(await five())
                generations.append(await run(engine, judge))
    finally:
        await engine.close()

    def p(xs: list[float], q: float) -> float:
        return sorted(xs)[min(len(xs) - 1, int(q * len(xs)))] * 1000

    print(f"{len(asks)} messages, alternating")
    print("| what | p50 | p90 | mean |\n|---|---|---|---|")
    for name, xs in (
        ("five scorings, concurrent", scorings),
        ("one constrained generation (48 tokens max)", generations),
    ):
        print(f"| {name} | {p(xs, 0.5):.0f} ms | {p(xs, 0.9):.0f} ms | {statistics.mean(xs) * 1000:.0f} ms |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_likelihood", description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=40, help="how many single asks of the dev split")
    asyncio.run(main(parser.parse_args().limit))
