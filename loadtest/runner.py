"""Drive a target with a workload: closed loop (fixed concurrency) or open loop (Poisson arrivals, ramped).

Warm-up requests run first and are marked (excluded from statistics). A
progress bar on stderr shows completed requests. Returns the traces and the
wall time of the measured part.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from tqdm import tqdm

from loadtest.stats import RequestTrace
from loadtest.targets import Target
from loadtest.workloads import BenchRequest


@dataclass(frozen=True)
class LoadShape:
    concurrency: int = 8  # closed loop
    rate_rps: float | None = None  # open loop when set
    ramp_s: float = 0.0  # open loop: rate rises linearly from 10 % over this long
    warmup: int = 2
    seed: int = 11


async def drive(
    target: Target, requests: Sequence[BenchRequest], shape: LoadShape, *, progress: bool = True
) -> tuple[list[RequestTrace], float]:
    warm = [await target.run(r) for r in requests[: shape.warmup]]
    for t in warm:
        t.warmup = True
    measured = list(requests[shape.warmup :]) or list(requests)
    bar = tqdm(
        total=len(measured),
        desc=target.name,
        file=sys.stderr,
        disable=not progress or not sys.stderr.isatty(),
        leave=False,
    )
    traces: list[RequestTrace] = []

    async def one(request: BenchRequest) -> None:
        traces.append(await target.run(request))
        bar.update(1)

    start = time.perf_counter()
    if shape.rate_rps is None:
        slots = asyncio.Semaphore(shape.concurrency)

        async def bounded(request: BenchRequest) -> None:
            async with slots:
                await one(request)

        await asyncio.gather(*(bounded(r) for r in measured))
    else:
        rng = random.Random(shape.seed)
        tasks = []
        for request in measured:
            elapsed = time.perf_counter() - start
            ramp = min(1.0, 0.1 + 0.9 * elapsed / shape.ramp_s) if shape.ramp_s > 0 else 1.0
            await asyncio.sleep(rng.expovariate(shape.rate_rps * ramp))
            tasks.append(asyncio.create_task(one(request)))
        await asyncio.gather(*tasks)
    wall = time.perf_counter() - start
    bar.close()
    return [*warm, *traces], wall
