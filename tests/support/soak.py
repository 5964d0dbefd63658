"""Soak: the process mesh under steady load at ~70% of its capacity; memory, descriptors and errors over time.

``python -m tests.support.soak --seconds 600`` (``make soak``) runs the full
soak and prints what it saw; the reliability suite runs a short one. Capacity
is the simulators' batch slots (replicas × ``sim_max_batch``); the load keeps
70% of them busy with back-to-back turns on fresh streams. After a warm-up
(caches, pools and allocator arenas fill once), the resident memory of every
service is sampled at the start and the end of the measured window, and its
open descriptors every second: a descriptor figure is the *floor* of the first
and of the last third of the window (``descriptor_floor``), because a socket
held by a turn in flight at the sampling instant is not a leak, while a leak
raises the floor (the short soak read 35 → 40 router descriptors once under
the full test run, from one instant's in-flight turns). Every turn must answer
(an error status, a lost stream or a timeout counts as an error).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentmesh.common.v1 import common_pb2
from tests.support import turns
from tests.support.process_mesh import AUTH, MeshShape, ProcessMesh

SOAK_SHAPE = MeshShape(replicas=2, routers=1, sim_max_batch=8, sim_decode_base_s=0.02)
#: Share of the replicas' batch slots kept busy.
LOAD_SHARE = 0.7
TOKENS = 40


@dataclass
class Sample:
    rss: int
    fds: int


@dataclass
class SoakResult:
    seconds: float
    workers: int
    turns: int = 0
    errors: list[str] = field(default_factory=list)
    start: dict[str, Sample] = field(default_factory=dict)
    end: dict[str, Sample] = field(default_factory=dict)

    def rss_growth(self, name: str) -> float:
        return self.end[name].rss / self.start[name].rss - 1

    def lines(self) -> list[str]:
        out = [f"{self.turns} turns in {self.seconds:.0f} s by {self.workers} workers, {len(self.errors)} errors"]
        for name, s0 in self.start.items():
            s1 = self.end[name]
            out.append(
                f"  {name:<9} RSS {s0.rss / 2**20:7.1f} → {s1.rss / 2**20:7.1f} MiB ({self.rss_growth(name):+.1%}), "
                f"fds (floor) {s0.fds} → {s1.fds}"
            )
        return out


def sample(mesh: ProcessMesh) -> dict[str, Sample]:
    return {s.name: Sample(s.rss_bytes(), s.open_fds()) for s in mesh.services}


def descriptor_floor(series: list[dict[str, Sample]], name: str) -> tuple[int, int]:
    """One service's fewest open descriptors in the first third of ``series`` and in the last third."""
    third = max(1, len(series) // 3)
    return min(s[name].fds for s in series[:third]), min(s[name].fds for s in series[-third:])


async def soak(mesh: ProcessMesh, seconds: float, warm_up_s: float) -> SoakResult:
    """Run the load for ``warm_up_s`` unmeasured, then ``seconds`` measured."""
    workers = max(1, round(LOAD_SHARE * mesh.shape.replicas * mesh.shape.sim_max_batch))
    result = SoakResult(seconds, workers)
    measuring = asyncio.Event()
    end = time.monotonic() + warm_up_s + seconds

    async def worker(n: int, stub: Any) -> None:
        i = 0
        while time.monotonic() < end:
            request = turns.start(f"soak {n}-{i}", max_tokens=TOKENS, system_prompt=f"You are soak worker {n}.")
            i += 1
            try:
                events = await turns.one_turn(stub, request, AUTH, within_s=30)
                done = turns.completed(events)
                if done.status or done.finish_reason != common_pb2.FINISH_REASON_LENGTH:
                    raise AssertionError(f"turn ended {done.finish_reason} with a status")
            except Exception as exc:  # every failure is counted and reported, none ends the soak
                if measuring.is_set():
                    result.errors.append(f"worker {n}: {exc!r}"[:300])
                continue
            if measuring.is_set():
                result.turns += 1

    async with mesh.channel() as channel:
        stub = mesh.stub(channel)
        tasks = [asyncio.create_task(worker(n, stub)) for n in range(workers)]
        await asyncio.sleep(warm_up_s)
        series = [sample(mesh)]
        measuring.set()
        running = asyncio.gather(*tasks)
        while not running.done():
            await asyncio.wait({running}, timeout=1.0)
            series.append(sample(mesh))
        await running
    for name, first in series[0].items():
        before, after = descriptor_floor(series, name)
        result.start[name] = Sample(first.rss, before)
        result.end[name] = Sample(series[-1][name].rss, after)
    return result


async def run(seconds: float, warm_up_s: float, folder: Path) -> SoakResult:
    mesh = ProcessMesh(folder, SOAK_SHAPE)
    try:
        await mesh.start()
        return await soak(mesh, seconds, warm_up_s)
    finally:
        await mesh.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600.0, help="measured soak time")
    parser.add_argument("--warm-up-s", type=float, default=30.0, help="unmeasured load before the first sample")
    parser.add_argument("--max-rss-growth", type=float, default=0.05, help="largest RSS growth allowed per service")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="agentmesh-soak-") as folder:
        result = asyncio.run(run(args.seconds, args.warm_up_s, Path(folder)))
    print("\n".join(result.lines()))
    for error in result.errors[:10]:
        print("  error:", error)
    grown = [n for n in result.start if result.rss_growth(n) >= args.max_rss_growth]
    leaked = [n for n, s in result.start.items() if result.end[n].fds > s.fds + 2]
    ok = not result.errors and not grown and not leaked and result.turns > 0
    print("soak:", "ok" if ok else f"FAILED (RSS grown: {grown}, descriptors: {leaked})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
