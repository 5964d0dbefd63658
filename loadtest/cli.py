"""``agentmesh-bench``: drive one target with one workload and report.

Examples::

    agentmesh-bench --target gateway --address 127.0.0.1:50051 --api-key agentmesh-dev-key \\
        --workload sessions --requests 64 --concurrency 8
    agentmesh-bench --target inference --address 127.0.0.1:50054 --workload distinct --rate 4 --ramp-s 5
    agentmesh-bench --target vllm --address 127.0.0.1:50060 --workload chat

Prints a table, writes ``loadtest/results/<name>.json`` and ``.png``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from loadtest.cpu import CpuMeter
from loadtest.report import plot, table, write_json
from loadtest.runner import LoadShape, drive
from loadtest.stats import Slo, by_priority, summarize
from loadtest.targets import AgentTarget, InferenceTarget, Target, VllmTarget
from loadtest.workloads import WORKLOADS, build

RESULTS = Path(__file__).resolve().parent / "results"


def make_target(kind: str, address: str, api_key: str) -> Target:
    if kind in ("gateway", "router"):
        gateway = kind == "gateway"
        return AgentTarget(address, api_key=api_key if gateway else "", tenant="" if gateway else "bench", name=kind)
    if kind == "inference":
        return InferenceTarget(address)
    if kind == "vllm":
        return VllmTarget(address)
    raise ValueError(kind)


async def main_async(args: argparse.Namespace) -> int:
    target = make_target(args.target, args.address, args.api_key)
    requests = build(args.workload, args.requests + args.warmup, max_tokens=args.max_tokens)
    shape = LoadShape(concurrency=args.concurrency, rate_rps=args.rate, ramp_s=args.ramp_s, warmup=args.warmup)
    pids = dict(item.split("=", 1) for item in args.cpu_of)
    meter = CpuMeter({name: int(pid) for name, pid in pids.items()})
    await target.start()
    try:
        meter.start()
        traces, wall = await drive(target, requests, shape)
        cpu = meter.stop()
    finally:
        await target.close()
    slo = Slo(ttft_s=args.slo_ttft_s, tpot_s=args.slo_tpot_s)
    name = f"{args.target}-{args.workload}"
    rows = {name: summarize(traces, wall, slo)}
    if len({t.priority for t in traces}) > 1:
        rows |= {f"{name} P{p}": s for p, s in by_priority(traces, wall, slo).items()}
    print(table(rows))
    tokens = max(1, rows[name].output_tokens)
    for proc, seconds in cpu.items():
        print(f"CPU {proc}: {seconds:.2f} s ({seconds * 1000 / tokens:.2f} s per 1000 output tokens)")
    write_json(RESULTS / f"{name}.json", rows, {"args": vars(args), "cpu_s": cpu})
    plot(RESULTS / f"{name}.png", {name: traces}, {name: rows[name]}, f"{name} ({args.requests} requests)")
    print(f"wrote {RESULTS / name}.json and .png")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agentmesh-bench", description="AgentMesh load generator")
    parser.add_argument("--target", choices=("gateway", "router", "inference", "vllm"), default="gateway")
    parser.add_argument("--address", default="127.0.0.1:50051")
    parser.add_argument("--api-key", default="agentmesh-dev-key")
    parser.add_argument("--workload", choices=WORKLOADS, default="chat")
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8, help="closed loop")
    parser.add_argument("--rate", type=float, default=None, help="open loop: Poisson arrivals per second")
    parser.add_argument("--ramp-s", type=float, default=0.0, help="open loop: ramp from 10 %% of the rate")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--slo-ttft-s", type=float, default=2.0)
    parser.add_argument("--slo-tpot-s", type=float, default=0.2)
    parser.add_argument(
        "--cpu-of",
        action="append",
        default=[],
        metavar="NAME=PID",
        help="report CPU seconds of this process (and its children); repeatable",
    )
    return asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
