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

The sections live in ``bench_overhead``, ``bench_routing`` and ``bench_streams``
(``vllm`` only shells out, so it stays here); this module runs them in order
and rewrites their blocks of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

import psutil

from loadtest.bench_env import ROOT
from loadtest.bench_overhead import overhead
from loadtest.bench_routing import overload, routing
from loadtest.bench_streams import tools, wire

BENCHMARKS = ROOT / "BENCHMARKS.md"


def machine() -> str:
    cpu = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = psutil.virtual_memory().total / 2**30
    return f"{os.cpu_count()} vCPU {cpu}, {mem:.0f} GiB RAM, no GPU; {time.strftime('%Y-%m-%d')}"


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
