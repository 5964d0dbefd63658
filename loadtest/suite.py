"""``make bench``: the benchmark suite; writes its sections of BENCHMARKS.md from the results.

Sections (each a ``<!-- bench:NAME -->`` block in BENCHMARKS.md, replaced on every run):

- ``overhead``: the same load on an inference replica directly (A), through the
  router (B) and through gateway → router (C), real processes, simulator engine
  with a fixed token cadence, interleaved A/B/C rounds; ΔTTFT and ΔITL against
  A, CPU seconds per 1000 output tokens per process.
- ``routing``: prefix-aware placement vs round-robin vs least-loaded, 4
  simulator replicas, multi-turn sessions sharing a system prompt, 1 and 2 routers.
- ``tools``: three 300 ms tools in one plan vs their sum.
- ``overload``: ~3× capacity with mixed priorities through the gateway.
- ``wire``: gzip on/off (requests and responses both) × frame coalescing on/off
  on the Generate link: bytes, messages per token, CPU per 1000 tokens.
- ``vllm`` (full mode only): the inference service vs vLLM's gRPC server.

``--quick`` keeps every section small (under a minute in all, no vLLM).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import psutil
import redis.asyncio as aioredis

from agentmesh.tools.v1 import tools_pb2, tools_pb2_grpc
from loadtest.cpu import CpuMeter
from loadtest.report import ms, plot, table
from loadtest.runner import LoadShape, drive
from loadtest.stats import RequestTrace, Slo, by_priority, summarize
from loadtest.targets import AgentTarget, InferenceTarget, Target
from loadtest.workloads import BenchRequest, build
from meshkit.mesh import FAST_SIM, start_mesh
from meshkit.proxy import CountingProxy
from meshkit.turns import converse
from services.inference.servicer import InferenceServicer
from services.inference.session import SessionSettings
from services.inference.simulator import SimulatorEngine, SimulatorSettings
from services.router.picker import LeastLoadedPicker, ReplicaPicker, RoundRobinPicker
from services.runtime.config import ServiceConfig
from services.runtime.health import wait_serving
from services.runtime.metrics import Metrics
from services.runtime.server import MeshServer
from services.tools.executor import ToolExecutor
from services.tools.registry import ToolDefinition, ToolRegistry
from services.tools.servicer import ToolExecutorServicer

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "loadtest" / "results"
BENCHMARKS = ROOT / "BENCHMARKS.md"
REDIS_URL = os.environ.get("AGENTMESH_BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
API_KEY = "bench-key-0123"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def machine() -> str:
    cpu = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = psutil.virtual_memory().total / 2**30
    return f"{os.cpu_count()} vCPU {cpu}, {mem:.0f} GiB RAM, no GPU; {time.strftime('%Y-%m-%d')}"


# -- overhead ------------------------------------------------------------------


async def overhead(quick: bool) -> str:
    ports = {k: free_port() for k in ("gateway", "router", "tools", "inference")}
    env = {
        **os.environ,
        "AGENTMESH_GATEWAY_API_KEYS": f"bench:{API_KEY}",
        "AGENTMESH_INFERENCE_SIM_DECODE_BASE_S": "0.02",
        "AGENTMESH_INFERENCE_SIM_DECODE_PER_SEQ_S": "0",
        "AGENTMESH_INFERENCE_SIM_PREFILL_S_PER_TOKEN": "0",
        "AGENTMESH_INFERENCE_SIM_OUTPUT_TOKENS": "1000",
        "AGENTMESH_GATEWAY_RATE_RPS": "100000",
        "AGENTMESH_GATEWAY_RATE_BURST": "100000",
        "AGENTMESH_GATEWAY_RATE_WINDOW_MAX": "10000000",
        "AGENTMESH_GATEWAY_RATE_TOKENS_PER_MIN": "100000000",
        "AGENTMESH_GATEWAY_RATE_TOKEN_BURST": "100000000",
        "AGENTMESH_ROUTER_RESPONSE_CACHE_TTL_S": "0",
        "AGENTMESH_LOG_LEVEL": "warning",
    }
    sim_port = ports["inference"] + 10
    proc = subprocess.Popen(  # noqa: ASYNC220 - the mesh runs beside the benchmark
        [
            sys.executable,
            "-m",
            "services.cli",
            "up",
            "--no-vllm",
            "--sim-replicas",
            "1",
            "--no-metrics",
            "--gateway-port",
            str(ports["gateway"]),
            "--router-port",
            str(ports["router"]),
            "--tools-port",
            str(ports["tools"]),
            "--inference-port",
            str(ports["inference"]),
        ],
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
            "B router": lambda: AgentTarget(f"127.0.0.1:{ports['router']}", name="B router"),
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


# -- routing -------------------------------------------------------------------


async def routing(quick: bool) -> str:
    from agentmesh.agent.v1 import agent_pb2

    redis = aioredis.Redis.from_url(REDIS_URL)
    system = " ".join(f"rule{i}" for i in range(100))
    sessions, turns = (7, 4) if quick else (11, 6)
    lines = [
        f"4 simulator replicas; {sessions} sessions × {turns} turns, each session's turns in order, sessions "
        "interleaved; a shared 100-token system prompt, then each session's own history; with 2 routers a "
        "session's turns alternate between them. Hit rate = prompt tokens served from the replicas' prefix "
        "caches / prompt tokens.",
        "",
        "| placement | routers | prefix-cache hit rate | TTFT p50 | turns/s |",
        "|---|---:|---:|---:|---:|",
    ]
    no_tools = agent_pb2.ToolChoice(mode=agent_pb2.TOOL_CHOICE_MODE_NONE)
    pickers: list[tuple[str, Callable[[], Any]]] = [
        ("prefix-aware (ours)", ReplicaPicker),
        ("round-robin", RoundRobinPicker),
        ("least-loaded", LeastLoadedPicker),
    ]
    for label, make_picker in pickers:
        for n_routers in (1, 2):
            await redis.flushdb()
            mesh = await start_mesh(redis, replicas=4)
            try:
                stubs = [await mesh.add_router(picker=make_picker(), response_cache_ttl_s=0) for _ in range(n_routers)]
                ids = [""] * sessions
                ttfts: list[float] = []
                start = time.perf_counter()
                for turn in range(turns):
                    for s in range(sessions):
                        req = agent_pb2.StartTurn(
                            session_id=ids[s],
                            message=f"session {s} turn {turn}",
                            system_prompt=system,
                            tool_choice=no_tools,
                        )
                        result = await converse(stubs[(s + turn) % n_routers], req)
                        ttfts.append(result.completed.time_to_first_token.ToNanoseconds() / 1e9)
                        ids[s] = result.accepted.session_id
                wall = time.perf_counter() - start
                ttfts.sort()
                lines.append(
                    f"| {label} | {n_routers} | {mesh.hit_rate():.3f} | {ttfts[len(ttfts) // 2] * 1e3:.1f} ms "
                    f"| {sessions * turns / wall:.1f} |"
                )
            finally:
                await mesh.close()
    await redis.flushdb()
    await redis.aclose()
    return "\n".join(lines)


# -- tools ---------------------------------------------------------------------


async def tools(quick: bool) -> str:
    async def nap(args: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0.3)
        return {"slept": 0.3, "n": args.get("n")}

    executor = ToolExecutor(ToolRegistry([ToolDefinition("nap", "sleep 300 ms", {"type": "object"}, nap)]))
    server = MeshServer(ServiceConfig(port=0), [ToolExecutorServicer(executor).service()], metrics=Metrics())
    await server.start()
    import grpc.aio

    rows = []
    async with grpc.aio.insecure_channel(server.address) as channel:
        for _ in range(3 if quick else 5):
            call: Any = tools_pb2_grpc.ToolExecutorServiceStub(channel).Execute()
            start = time.perf_counter()
            for i in range(3):
                tool_call = tools_pb2.ToolCall(call_id=str(i), tool_name="nap", arguments_json=json.dumps({"n": i}))
                await call.write(tools_pb2.ExecuteRequest(call=tool_call))
            results = [await call.read() for _ in range(3)]
            wall = time.perf_counter() - start
            await call.done_writing()
            total = sum(r.result.latency.ToNanoseconds() / 1e9 for r in results)
            rows.append((wall, total))
    await server.drain(grace=0)
    wall = sorted(r[0] for r in rows)[len(rows) // 2]
    total = sorted(r[1] for r in rows)[len(rows) // 2]
    return (
        f"Three calls of a 300 ms tool issued together on one Execute stream (median of {len(rows)} runs): "
        f"**{wall * 1e3:.0f} ms** wall time, against **{total * 1e3:.0f} ms** for the sum of their latencies "
        f"(×{total / wall:.2f})."
    )


# -- overload ------------------------------------------------------------------


async def overload(quick: bool) -> str:
    redis = aioredis.Redis.from_url(REDIS_URL)
    await redis.flushdb()
    sim = replace(FAST_SIM, output_tokens=20, decode_base_s=0.01, max_batch=64)
    mesh = await start_mesh(redis, replicas=2, sim=sim)
    try:
        await mesh.add_router(response_cache_ttl_s=0)
        _, _, server = await mesh.add_gateway(
            keys=f"bench:{API_KEY}",
            rate_rps=1e5,
            rate_burst=1e5,
            rate_window_max=10**7,
            concurrency_initial=4.0,
            concurrency_min=4.0,
            concurrency_max=4.0,
            slo_p0_s=1.5,
            slo_p1_s=1.0,
            slo_p2_s=0.3,
        )
        target = AgentTarget(server.address, api_key=API_KEY, name="gateway")
        await target.start()
        n = 60 if quick else 180
        rate = 60.0  # capacity ≈ 4 slots / 0.2 s = 20 requests/s → 3×
        traces, wall = await drive(target, build("mixed", n + 2, max_tokens=20), LoadShape(rate_rps=rate, warmup=2))
        await target.close()
    finally:
        await mesh.close()
        await redis.flushdb()
        await redis.aclose()
    slo = Slo(ttft_s=1.5)
    parts = by_priority(traces, wall, slo)
    lines = [
        f"{n} Complete requests at {rate:.0f}/s (Poisson; capacity ≈ 20/s: 4 admission slots × ~0.2 s each), "
        "P0/P1/P2 in turn; queue-wait SLOs P0 1.5 s, P1 1 s, P2 0.3 s; goodput = requests with TTFT ≤ 1.5 s.",
        "",
        "| class | served | shed (RESOURCE_EXHAUSTED) | E2E p50 | E2E p99 | goodput req/s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for p, s in parts.items():
        shed = s.errors_by_code.get("RESOURCE_EXHAUSTED", 0)
        lines.append(
            f"| P{p} | {s.requests - s.errors}/{s.requests} | {shed} ({shed / max(1, s.requests):.0%}) "
            f"| {ms(s.e2e.p50)} ms | {ms(s.e2e.p99)} ms | {s.goodput_rps:.2f} |"
        )
    total = summarize(traces, wall, slo)
    other = {k: v for k, v in total.errors_by_code.items() if k != "RESOURCE_EXHAUSTED"}
    lines += ["", f"Total goodput {total.goodput_rps:.2f} req/s; errors other than shedding: {other or 'none'}."]
    return "\n".join(lines)


# -- wire ----------------------------------------------------------------------


async def wire(quick: bool) -> str:
    n, tokens = (16, 32) if quick else (48, 64)
    lines = [
        f"{n} requests × {tokens} tokens, all in flight at once on one Generate stream to a simulator "
        "replica (20 ms steps); bytes counted by a loopback proxy, CPU of this process (client + server).",
        "",
        "| gzip | coalescing | bytes up | bytes down | down bytes/token | messages/token | CPU s/1000 tok |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for gzip in (True, False):
        for coalesce in (True, False):
            engine = SimulatorEngine(
                SimulatorSettings(
                    decode_base_s=0.02, decode_per_seq_s=0.0, prefill_s_per_token=0, output_tokens=tokens, max_batch=n
                )
            )
            await engine.start()
            servicer = InferenceServicer(engine, SessionSettings("wire", default_max_tokens=tokens, coalesce=coalesce))
            compression = grpc.Compression.Gzip if gzip else grpc.Compression.NoCompression
            # Both directions really switched: the server's responses as well as the client's requests.
            server = MeshServer(ServiceConfig(port=0), [servicer.service()], metrics=Metrics(), compression=compression)
            await server.start()
            proxy = CountingProxy(server.port)
            port = await proxy.start()
            target = InferenceTarget(f"127.0.0.1:{port}", compression=gzip)
            await target.start()
            cpu0 = time.process_time()
            reqs = [BenchRequest(f"wire test request number {i} " * 8, max_tokens=tokens) for i in range(n)]
            got = await asyncio.gather(*(target.run(r) for r in reqs))
            cpu = time.process_time() - cpu0
            frames = target.frames
            await target.close()
            await proxy.close()
            await server.drain(grace=0)
            await engine.close()
            total = sum(t.tokens for t in got)
            lines.append(
                f"| {'on' if gzip else 'off'} | {'on' if coalesce else 'off'} | {proxy.up} | {proxy.down} | "
                f"{proxy.down / total:.1f} | {frames / total:.3f} | {cpu * 1000 / total:.2f} |"
            )
    return "\n".join(lines)


# -- vllm ----------------------------------------------------------------------


async def vllm(quick: bool) -> str:
    out = await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable,
            "-m",
            "loadtest.inference_vs_vllm",
            "--rounds",
            "1",
            "--requests",
            "16",
            "--concurrency",
            "8",
            "--max-tokens",
            "32",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    keep = [line for line in out.stdout.splitlines() if line.strip().startswith(("ours", "vllm", "shared", "distinct"))]
    return (
        "`python -m loadtest.inference_vs_vllm --rounds 1 --requests 16 --concurrency 8 --max-tokens 32` "
        "(the fuller run is the section above):\n\n```\n" + "\n".join(keep) + "\n```"
    )


SECTIONS: dict[str, Callable[[bool], Coroutine[Any, Any, str]]] = {
    "overhead": overhead,
    "routing": routing,
    "tools": tools,
    "overload": overload,
    "wire": wire,
    "vllm": vllm,
}
TITLES = {
    "overhead": "Mesh overhead per hop",
    "routing": "Prefix-aware routing",
    "tools": "Parallel tools",
    "overload": "Overload: priorities and shedding",
    "wire": "Wire: gzip and frame coalescing",
    "vllm": "Inference vs vLLM (suite run)",
}


def write_section(name: str, body: str, command: str) -> None:
    text = BENCHMARKS.read_text() if BENCHMARKS.exists() else "# Benchmarks\n"
    block = (
        f"<!-- bench:{name} -->\n## {TITLES[name]}\n\n_{machine()} — `{command}`_\n\n{body.strip()}\n"
        f"<!-- /bench:{name} -->"
    )
    pattern = re.compile(rf"<!-- bench:{name} -->.*?<!-- /bench:{name} -->", re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    BENCHMARKS.write_text(text)


async def main_async(args: argparse.Namespace) -> int:
    names = args.only or [n for n in SECTIONS if not (args.quick and n == "vllm")]
    command = "make bench" + (" QUICK=1" if args.quick else "")
    for name in names:
        start = time.perf_counter()
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        body = await SECTIONS[name](args.quick)
        write_section(name, body, command)
        print(f"[bench] {name} done in {time.perf_counter() - start:.0f}s", file=sys.stderr, flush=True)
    print(f"updated {BENCHMARKS.relative_to(ROOT)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true", help="small sections, no vLLM (under a minute)")
    parser.add_argument("--only", nargs="*", choices=list(SECTIONS), help="run only these sections")
    return asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
