"""Benchmark: our inference service, or the whole mesh, against vLLM's own gRPC server — same model, same workload.

``--ours inference`` (default) compares our inference service alone with vLLM's
gRPC server (``vllm serve --grpc``); ``--ours mesh`` puts the full mesh in its
place — gateway → router → inference as real processes (``agentmesh up``),
driven through the public ``Complete`` RPC. Servers, engine settings and the
clients: ``engine_servers``, ``engine_clients``; prompts, round order, output
checks and ratios: ``head_to_head``.

Each server runs alone (two vLLM engines on a 2-core box would measure
contention, not servers) and is restarted per round; rounds alternate their
order (ours, vLLM, vLLM, ours, …), and the report compares ratios, not
absolute times across runs. Both sides get the same chat messages (the mesh
and our service apply the chat template themselves; vLLM's server is sent the
token ids that template makes), greedy decoding and ``--max-tokens``, so their
answers must match token for token: the report checks that per workload.

Workloads (``--requests`` N at concurrency ``--concurrency`` C):
- ``shared-prefix``: one long system prompt (~530 prompt tokens with the template), distinct questions;
- ``distinct``: distinct questions, no shared system prompt.

Prints per-round rows and mean ratios as markdown; writes everything to
``loadtest/results/inference_vs_vllm[_mesh].json`` (git-ignored).

Usage: python -m loadtest.inference_vs_vllm [--ours inference|mesh] [--rounds 2] [--requests 32] [--concurrency 8]
       [--max-tokens 64] [--workload shared-prefix|distinct]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from loadtest.engine_clients import Runner, run_inference, run_mesh, run_vllm
from loadtest.engine_servers import ROOT, Launched, start_inference, start_mesh, start_vllm
from loadtest.head_to_head import (
    WORKLOADS,
    Agreement,
    Completion,
    Prompt,
    agreement,
    order,
    prompts,
    ratios,
    ratios_table,
    rounds_table,
    warmup,
)
from loadtest.stats import Summary, summarize
from services.inference.config import default_model_dir
from services.runtime.health import wait_serving


@dataclass(frozen=True)
class Side:
    name: str
    start: Callable[[str], Launched]
    run: Runner


SIDES = {
    "inference": Side("ours", start_inference, run_inference),
    "mesh": Side("mesh", start_mesh, run_mesh),
    "vllm": Side("vllm", start_vllm, run_vllm),
}


async def bench_side(
    side: Side, args: argparse.Namespace, workloads: dict[str, list[Prompt]], warm: list[Prompt]
) -> tuple[dict[str, Summary], dict[str, list[Completion]]]:
    """Start one server, warm it up, run every workload on it, stop it."""
    started = time.perf_counter()
    server = side.start(args.model)
    try:
        try:
            await wait_serving(server.address, within_s=args.start_timeout_s, still_starting=server.alive)
        except (RuntimeError, TimeoutError) as exc:
            raise SystemExit(f"{side.name} did not start: {exc} (see loadtest/results/{server.name}.log)") from None
        print(f"  {side.name:6s} serving after {time.perf_counter() - started:.0f} s", flush=True)
        warm_traces, _ = await side.run(server.address, warm, 2, 4)  # not measured
        if failed := [t.error for t in warm_traces if t.error is not None]:
            raise SystemExit(f"{side.name}: warm-up failed: {failed}")
        results: dict[str, Summary] = {}
        answers: dict[str, list[Completion]] = {}
        for kind, batch in workloads.items():
            t0 = time.perf_counter()
            traces, answers[kind] = await side.run(server.address, batch, args.concurrency, args.max_tokens)
            results[kind] = summarize(traces, time.perf_counter() - t0)
            print(f"  {side.name:6s} {kind:14s} {fmt(results[kind])}", flush=True)
        return results, answers
    finally:
        server.stop()


def fmt(s: Summary) -> str:
    return (
        f"tok/s {s.output_tok_s:7.1f}  TTFT p50 {s.ttft_p50 * 1e3:7.1f} ms p99 {s.ttft_p99 * 1e3:7.1f} ms  "
        f"ITL p50 {s.itl_p50 * 1e3:6.1f} ms p99 {s.itl_p99 * 1e3:6.1f} ms  errors {s.errors}"
    )


def summary_json(s: Summary) -> dict[str, Any]:
    return {**asdict(s), "output_tok_s": s.output_tok_s}


async def main_async(args: argparse.Namespace) -> int:
    from transformers import AutoTokenizer

    from services.router.turn.prompt import DEFAULT_SYSTEM_PROMPT

    tokenizer: Any = AutoTokenizer.from_pretrained(args.model)

    def encode(messages: list[dict[str, str]]) -> Sequence[int]:
        # What the inference service's engine does with chat messages (vllm_engine.prepare).
        ids = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, return_dict=False)
        return [int(i) for i in ids]

    # The router answers a Complete without a system prompt under its own default: say it to both sides.
    default_system = DEFAULT_SYSTEM_PROMPT if args.ours == "mesh" else ""
    kinds = WORKLOADS if args.workload == "all" else (args.workload,)
    workloads = {k: prompts(k, args.requests, encode, default_system=default_system) for k in kinds}
    warm = warmup(encode, default_system=default_system)
    ours, theirs = SIDES[args.ours], SIDES["vllm"]
    began = time.perf_counter()
    rounds: list[dict[str, dict[str, Summary]]] = []
    checks: list[dict[str, Agreement]] = []
    for r in range(args.rounds):
        print(f"round {r + 1}/{args.rounds}", flush=True)
        results: dict[str, dict[str, Summary]] = {}
        answers: dict[str, dict[str, list[Completion]]] = {}
        for name in order(r, (ours.name, theirs.name)):
            side = ours if name == ours.name else theirs
            results[name], answers[name] = await bench_side(side, args, workloads, warm)
        for batch in answers[theirs.name].values():
            for a in batch:
                a.text = tokenizer.decode(a.token_ids, skip_special_tokens=True)
        checks.append({k: agreement(answers[ours.name][k], answers[theirs.name][k]) for k in kinds})
        for kind, check in checks[-1].items():
            verdict = "identical" if check.identical else f"DIFFER — first: {check.first_difference}"
            print(f"  answers {kind}: {check.same_text}/{check.requests} same text, {verdict}", flush=True)
        rounds.append(results)
    print(f"\n{rounds_table(rounds)}\n\n{ratios_table(rounds, kinds, ours.name)}")
    print("\n(throughput > 1× and TTFT, ITL < 1× favour ours)")
    out = ROOT / "loadtest" / "results" / f"inference_vs_vllm{'_mesh' if args.ours == 'mesh' else ''}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "args": vars(args),
        "wall_s": time.perf_counter() - began,
        "rounds": [{who: {k: summary_json(s) for k, s in res.items()} for who, res in rd.items()} for rd in rounds],
        "answers_agree": [{k: asdict(c) for k, c in rc.items()} for rc in checks],
        "ratios": {k: ratios(rounds, k, ours.name) for k in kinds},
    }
    out.write_text(json.dumps(report, indent=2))
    print(f"\nwrote {out.relative_to(ROOT)} ({time.perf_counter() - began:.0f} s)")
    return 0 if all(c.identical for rc in checks for c in rc.values()) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.inference_vs_vllm", description=__doc__.splitlines()[0])
    parser.add_argument("--ours", choices=("inference", "mesh"), default="inference", help="what faces vLLM's server")
    parser.add_argument("--workload", choices=(*WORKLOADS, "all"), default="all")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--model", default=default_model_dir())
    parser.add_argument("--start-timeout-s", type=float, default=600.0, help="per server start")
    return asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
