"""The suite's ``overhead`` section: what each hop of the mesh adds, measured on real processes.

Its own module because it is the one section that runs the mesh as processes
(``services.cli up``) and meters each process's CPU, rather than in-process.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable

import psutil

from loadtest.bench_env import API_KEY, RESULTS, ROOT
from loadtest.cpu import CpuMeter
from loadtest.report import ms, plot, table
from loadtest.runner import LoadShape, drive
from loadtest.stats import RequestTrace, summarize
from loadtest.targets import AgentTarget, InferenceTarget, Target
from loadtest.workloads import build
from meshkit.up import BENCH_ENV, UpPorts, free_port, up_argv
from services.runtime.health import wait_serving


async def overhead(quick: bool) -> str:
    ports = {k: free_port() for k in ("gateway", "router", "tools", "inference")}
    env = {
        **os.environ,
        "AGENTMESH_GATEWAY_API_KEYS": f"bench:{API_KEY}",
        "AGENTMESH_INFERENCE_SIM_DECODE_BASE_S": "0.02",
        "AGENTMESH_INFERENCE_SIM_DECODE_PER_SEQ_S": "0",
        "AGENTMESH_INFERENCE_SIM_PREFILL_S_PER_TOKEN": "0",
        "AGENTMESH_INFERENCE_SIM_OUTPUT_TOKENS": "1000",
        **BENCH_ENV,
    }
    sim_port = ports["inference"] + 10
    proc = subprocess.Popen(  # noqa: ASYNC220 - the mesh runs beside the benchmark
        up_argv(UpPorts(**ports)),
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        await wait_serving(f"127.0.0.1:{ports['gateway']}", within_s=60)
        children = psutil.Process(proc.pid).children()
        pids = {}
        for child in children:
            cmd = " ".join(child.cmdline())
            for name, marker in (
                ("inference", "services.inference"),
                ("router", "services.router"),
                ("gateway", "-m gateway"),
                ("tools", "services.tools"),
            ):
                if marker in cmd:
                    pids[name] = child.pid
        targets: dict[str, Callable[[], Target]] = {
            "A inference": lambda: InferenceTarget(f"127.0.0.1:{sim_port}", name="A inference"),
            "B router": lambda: AgentTarget(f"127.0.0.1:{ports['router']}", tenant="bench", name="B router"),
            "C gateway": lambda: AgentTarget(f"127.0.0.1:{ports['gateway']}", api_key=API_KEY, name="C gateway"),
        }
        n, rounds = (24, 1) if quick else (64, 2)
        traces: dict[str, list[RequestTrace]] = {k: [] for k in targets}
        walls: dict[str, float] = dict.fromkeys(targets, 0.0)
        cpu: dict[str, dict[str, float]] = {k: dict.fromkeys(pids, 0.0) for k in targets}
        for _ in range(rounds):
            for name, make in targets.items():
                target = make()
                await target.start()
                meter = CpuMeter(pids)
                meter.start()
                got, wall = await drive(target, build("chat", n + 2, max_tokens=32), LoadShape(concurrency=4))
                for k, v in meter.stop().items():
                    cpu[name][k] += v
                await target.close()
                traces[name] += got
                walls[name] += wall
        rows = {name: summarize(traces[name], walls[name]) for name in targets}
        plot(RESULTS / "overhead.png", traces, rows, "mesh overhead (simulator, fixed 20 ms token cadence)")
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(60)
    base = rows["A inference"]
    lines = [
        f"Fixed cadence: simulator replica, 20 ms per token whatever the batch, no prefill cost; {n} requests × "
        f"32 tokens per target per round, concurrency 4, {rounds} interleaved A/B/C round(s). A is one multiplexed "
        "Generate stream to the replica; B and C are Complete calls (B to the router, C to the gateway).",
        "",
        table(rows),
        "",
        "| hop added | ΔTTFT p50 | ΔTTFT p99 | ΔITL p50 | ΔITL p99 |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in ("B router", "C gateway"):
        s = rows[name]
        lines.append(
            f"| {name} vs A | {ms(s.ttft.p50 - base.ttft.p50)} ms | {ms(s.ttft.p99 - base.ttft.p99)} ms | "
            f"{ms(s.itl.p50 - base.itl.p50)} ms | {ms(s.itl.p99 - base.itl.p99)} ms |"
        )
    lines += [
        "",
        "CPU seconds per 1000 output tokens, by process (all rounds of each target):",
        "",
        "| target | " + " | ".join(sorted(cpu["A inference"])) + " |",
        "|---|" + "---:|" * len(cpu["A inference"]),
    ]
    for name in targets:
        tokens = max(1, rows[name].output_tokens)
        lines.append(
            f"| {name} | " + " | ".join(f"{cpu[name][k] * 1000 / tokens:.2f}" for k in sorted(cpu[name])) + " |"
        )
    lines += ["", "![overhead](loadtest/results/overhead.png) (written by `make bench`; results are git-ignored)"]
    return "\n".join(lines)
