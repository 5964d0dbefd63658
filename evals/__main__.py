"""``python -m evals`` (``make eval``): run the agent evaluation on a real mesh and write EVAL.md.

Everything runs in this one process on loopback, as the e2e tests do: a vLLM
engine on the embedded model behind an InferenceServicer, a tool executor with
the built-in tools (its Redis cache namespace flushed first, so no result comes
from an earlier run), and one router per tool-selection mode, each with the
response cache off so every answer is generated. All routers share the engine
and the tool executor, so the modes differ only in how tools are selected.

Nothing happens at import time: vLLM starts its engine core with
multiprocessing *spawn*, which re-imports this module in the child.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import shlex
import signal
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import grpc.aio
import redis.asyncio as aioredis
import uvloop

from agentmesh.agent.v1 import agent_pb2_grpc
from agentmesh.common.v1 import common_pb2
from evals.cases import CASES_DIR, SPLITS, Case, CaseError, load_cases
from evals.catalog import GENERALITY_DIR, catalog_specs, catalog_tools, load_catalog
from evals.catalog_mcp_server import catalog_mcp_servers
from evals.generality import (
    BARE,
    CLIENT,
    GENERALITY_ABOUT,
    MCP,
    bare_section,
    client_section,
    mcp_section,
    without_catalog,
)
from evals.report import CHAT_BEGIN, CHAT_END, RunInfo, render_markdown
from evals.runner import DEFAULT_TURN_TIMEOUT_S, EVAL_TENANT, run_eval
from evals.summary import Report
from services.inference.config import default_model_dir
from services.inference.servicer import InferenceServicer
from services.inference.session import SessionSettings
from services.inference.vllm_engine import VllmEngine, VllmSettings
from services.router.build import Router, build_router
from services.router.config import RouterConfig
from services.runtime.cache import TwoLevelCache
from services.runtime.config import ServiceConfig, load_config
from services.runtime.metrics import Metrics
from services.runtime.server import MeshServer
from services.runtime.tenancy import TenantInterceptor
from services.tools.builtin import default_tools
from services.tools.executor import ToolExecutor
from services.tools.mcp.config import McpServerConfig
from services.tools.mcp.connection import quiet_sdk_logs
from services.tools.mcp.mount import McpMount
from services.tools.registry import ToolDefinition, ToolRegistry
from services.tools.servicer import ToolExecutorServicer

MODES = ("embedding", "llm")
#: The generality suite scores plans, not answers: its answers are cut at this many tokens, so its turns are short.
GENERALITY_ANSWER_TOKENS = 24
#: The changelog of earlier reports, appended to the report.
CHANGELOG = Path(__file__).resolve().parent / "CHANGELOG.md"
MODEL_ID = "SmolLM2-135M-Instruct"
#: Database 15, the one the tests use: nothing of value lives there.
REDIS_URL = os.environ.get("AGENTMESH_EVAL_REDIS_URL", "redis://127.0.0.1:6379/15")
#: The eval's own tool-cache namespace and its sessions' keys, deleted before and after every run.
TOOL_CACHE_NAMESPACE = "agentmesh-eval:tools:"
SESSION_NAMESPACE = f"agentmesh:session:{{{EVAL_TENANT}:"
READY_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class EvalArgs:
    splits: tuple[str, ...]
    modes: tuple[str, ...]
    limit: int | None
    out: Path
    show_heldout: bool
    turn_timeout_s: float
    cases_dir: Path = CASES_DIR
    suites: tuple[str, ...] = ("builtin", "generality")
    generality_dir: Path = GENERALITY_DIR
    #: Also run the generality prompts without the catalog, as client tools and from an MCP server.
    compare: bool = True
    #: Router flags for every router of the run (``--router-flag=--selector-likelihood-weight=0``): a paired
    #: comparison of one setting on the same cases.
    router_flags: tuple[str, ...] = ()


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _modes(text: str) -> tuple[str, ...]:
    modes = tuple(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    unknown = [m for m in modes if m not in MODES]
    if not modes or unknown:
        raise argparse.ArgumentTypeError(f"comma-separated modes among {', '.join(MODES)}")
    return modes


def parse_args(argv: Sequence[str] | None = None) -> EvalArgs:
    parser = argparse.ArgumentParser(
        prog="python -m evals",
        description="Run the agent evaluation through an in-process mesh on the embedded model and write EVAL.md.",
    )
    parser.add_argument("--split", choices=[*SPLITS, "all"], default="all", help="which cases to run (default: all)")
    parser.add_argument(
        "--modes", type=_modes, default=MODES, help="router tool-selection modes to compare (default: embedding,llm)"
    )
    parser.add_argument("--limit", type=_positive_int, help="run only the first N cases of each split")
    parser.add_argument("--out", type=Path, default=Path("EVAL.md"), help="report file (default: EVAL.md)")
    parser.add_argument(
        "--show-heldout",
        action="store_true",
        help="list held-out failures in full (messages, arguments, answers); off so the tuner never reads them",
    )
    parser.add_argument(
        "--turn-timeout-s", type=float, default=DEFAULT_TURN_TIMEOUT_S, help="time allowed per turn (CPU is slow)"
    )
    parser.add_argument(
        "--cases",
        type=Path,
        default=CASES_DIR,
        help="folder of <split>.jsonl case files (default: evals/cases): your own prompts, judged the same way",
    )
    parser.add_argument(
        "--suite",
        choices=["builtin", "generality", "all"],
        default="all",
        help="builtin: the cases folder on the built-in tools; generality: the catalog of description-only tools "
        "(evals/generality) registered beside them, and its prompts without it; all (default): both",
    )
    parser.add_argument(
        "--generality-cases",
        type=Path,
        default=GENERALITY_DIR,
        help="folder of <split>.jsonl generality cases over the catalog (default: evals/generality)",
    )
    parser.add_argument(
        "--no-compare",
        action="store_true",
        help="generality: run only the catalog served in process, not also without it, as client tools and over MCP",
    )
    parser.add_argument(
        "--router-flag",
        action="append",
        default=[],
        metavar="FLAG",
        help="a router flag for every router of the run, e.g. --router-flag=--selector-likelihood-weight=0",
    )
    ns = parser.parse_args(argv)
    splits = SPLITS if ns.split == "all" else (ns.split,)
    suites = ("builtin", "generality") if ns.suite == "all" else (ns.suite,)
    return EvalArgs(
        splits,
        ns.modes,
        ns.limit,
        ns.out,
        ns.show_heldout,
        ns.turn_timeout_s,
        ns.cases,
        suites,
        ns.generality_cases,
        not ns.no_compare,
        tuple(ns.router_flag),
    )


def select_cases(cases: Sequence[Case], limit: int | None) -> list[Case]:
    """The first ``limit`` cases of each split (all of them without a limit), split order kept."""
    if limit is None:
        return list(cases)
    taken: dict[str, int] = {}
    selected = []
    for case in cases:
        if taken.get(case.split, 0) < limit:
            taken[case.split] = taken.get(case.split, 0) + 1
            selected.append(case)
    return selected


@dataclass
class EvalMesh:
    """A tool executor (and the MCP servers it mounts) and one router per mode on loopback; ``stubs`` maps each
    mode to its AgentService."""

    redis: aioredis.Redis
    tools_server: MeshServer
    mount: McpMount
    stubs: dict[str, Any] = field(default_factory=dict)
    routers: list[tuple[Router, MeshServer, grpc.aio.Channel]] = field(default_factory=list)

    async def close(self) -> None:
        for router, server, channel in self.routers:
            await channel.close()
            await server.drain(grace=0)
            await router.close()
        await self.tools_server.drain(grace=0)
        await self.mount.close()
        await flush_eval_keys(self.redis)


async def flush_namespace(redis: aioredis.Redis, namespace: str) -> int:
    """Delete every key under ``namespace`` (never the whole database); returns how many went."""
    deleted = 0
    batch: list[bytes] = []
    async for key in redis.scan_iter(match=namespace + "*", count=500):
        batch.append(key)
        if len(batch) >= 500:
            deleted += await redis.delete(*batch)
            batch.clear()
    if batch:
        deleted += await redis.delete(*batch)
    return deleted


async def flush_eval_keys(redis: aioredis.Redis) -> int:
    """The eval's tool-cache entries and sessions, so no run sees another's."""
    return await flush_namespace(redis, TOOL_CACHE_NAMESPACE) + await flush_namespace(redis, SESSION_NAMESPACE)


async def start_eval_mesh(
    redis: aioredis.Redis,
    inference_address: str,
    modes: Sequence[str],
    extra_tools: Sequence[ToolDefinition] = (),
    label: str = "",
    *,
    mcp_servers: Sequence[McpServerConfig] = (),
    router_flags: Sequence[str] = (),
) -> EvalMesh:
    """The tool executor (``extra_tools`` and the tools of ``mcp_servers`` beside the built-ins) and a router per
    tool-selection mode, all on ``inference_address``; ready to serve.

    Shared by ``make eval`` and the smoke test (which brings its own vLLM
    replica). The response cache is off on every router: a replayed answer
    would say nothing about the mode that replays it. The routers start once
    every MCP server is up, so their first listing has all its tools.
    """
    await flush_eval_keys(redis)
    registry = ToolRegistry([*default_tools(), *extra_tools])
    mount = McpMount(mcp_servers, registry)
    executor = ToolExecutor(registry, cache=TwoLevelCache(TOOL_CACHE_NAMESPACE, redis), unknown_tool=mount.unknown_tool)
    tools_server = MeshServer(ServiceConfig(port=0), [ToolExecutorServicer(executor).service()], metrics=Metrics())
    await tools_server.start()
    mesh = EvalMesh(redis, tools_server, mount)
    try:
        if mcp_servers:
            quiet_sdk_logs(debug=False)
            mount.start()
            await mount.settled(READY_TIMEOUT_S)
            down = [f"{c.name} ({c.unavailable()})" for c in mount.connections.values() if c.unavailable()]
            if down:
                raise RuntimeError(f"MCP servers not up: {', '.join(down)}")
        for mode in modes:
            config = replace(
                load_config(RouterConfig, router_flags, {}),
                port=0,
                inference=(inference_address,),
                tools=tools_server.address,
                response_cache_ttl_s=0,
                tool_selection=mode,
            )
            config.validate()
            router = build_router(config, redis, Metrics())
            server = MeshServer(
                config, [router.servicer.service()], metrics=Metrics(), interceptors=[TenantInterceptor()]
            )
            await server.start()
            channel = grpc.aio.insecure_channel(server.address)
            mesh.routers.append((router, server, channel))
            await router.start()
            if not await router.replicas.wait_any(READY_TIMEOUT_S):
                raise RuntimeError(f"router ({mode}) did not connect to the inference replica {inference_address}")
            mesh.stubs[mode + label] = agent_pb2_grpc.AgentServiceStub(channel)
    except BaseException:
        await mesh.close()
        raise
    return mesh


@contextlib.asynccontextmanager
async def embedded_replica(max_output_tokens: int = 512) -> AsyncIterator[str]:
    """vLLM on the embedded model behind an InferenceServicer on loopback, for the block; yields its address.

    Shared by ``make eval`` and ``python -m evals.chat``. The engine starts here (~1 minute on CPU) and is
    closed on the way out, however the block ends.
    """
    engine = VllmEngine(VllmSettings(model=default_model_dir(), model_id=MODEL_ID, max_output_tokens=max_output_tokens))
    inference: MeshServer | None = None
    try:
        await engine.start()
        servicer = InferenceServicer(engine, SessionSettings(replica_id="vllm-0", default_max_tokens=64))
        inference = MeshServer(ServiceConfig(port=0), [servicer.service()], metrics=Metrics())
        await inference.start()
        yield inference.address
    finally:
        if inference is not None:
            await inference.drain(grace=0)
        await engine.close()


async def connect_eval_redis(prog: str) -> aioredis.Redis | None:
    """The eval's Redis (``REDIS_URL``), answering; None after saying on stderr why not (shared by the evals)."""
    redis = aioredis.Redis.from_url(REDIS_URL)
    try:
        await redis.ping()
    except Exception as exc:
        print(f"{prog}: error: Redis at {REDIS_URL} is not reachable ({exc}); `make setup` starts one", file=sys.stderr)
        await redis.aclose()
        return None
    return redis


def machine_description() -> str:
    """CPU model, cores and GPU presence, for the report's header."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    gpu = "NVIDIA GPU present" if Path("/dev/nvidia0").exists() else "no GPU"
    return f"{model}, {os.cpu_count()} cores ({usable} usable by this process), {gpu}"


def _headline(report: Report) -> str:
    lines = []
    for split in [s for s in ("heldout", "dev") if s in report.splits]:
        for mode in report.modes:
            s = report.summary(mode, split)
            lines.append(
                f"{split:8} {mode:10} tool choice {s.tool_choice}  arguments {s.arguments}  answers {s.answers}"
            )
    return "\n".join(lines)


async def run(args: EvalArgs, argv: Sequence[str]) -> int:
    try:
        cases = select_cases(load_cases(args.splits, args.cases_dir), args.limit) if "builtin" in args.suites else []
        catalog = load_catalog() if "generality" in args.suites else {}
        general = select_cases(load_cases(args.splits, args.generality_dir, catalog), args.limit) if catalog else []
    except (CaseError, OSError, ValueError) as exc:
        print(f"evals: error: {exc}", file=sys.stderr)
        return 2
    redis = await connect_eval_redis("evals")
    if redis is None:
        return 1
    progress = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    documents: list[str] = []
    try:
        async with embedded_replica() as inference:
            date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
            info = RunInfo(
                command=shlex.join(["python", "-m", "evals", *argv]),
                date=date,
                machine=machine_description(),
                model=f"{MODEL_ID} (embedded), vLLM on CPU, greedy decoding (temperature 0)",
            )
            if cases:
                report = await _suite(redis, inference, args, cases, (), "", progress, None)
                documents.append(render_markdown(report, info, show_heldout=args.show_heldout))
                print(_headline(report))
            if general:
                tools = catalog_tools(catalog)
                short = common_pb2.SamplingParams(max_tokens=GENERALITY_ANSWER_TOKENS)
                report = await _suite(redis, inference, args, general, tools, "", progress, short)
                title = f"Generality evaluation: {len(catalog)} description-only tools beside the built-ins"
                document = render_markdown(
                    report, info, show_heldout=args.show_heldout, title=title, about=GENERALITY_ABOUT
                )
                if args.compare:
                    bare_args = replace(args, modes=("embedding",))
                    bare = await _suite(
                        redis, inference, bare_args, without_catalog(general), (), BARE, progress, short
                    )
                    specs = catalog_specs(catalog)
                    client = await _suite(redis, inference, bare_args, general, (), CLIENT, progress, short, specs)
                    servers = catalog_mcp_servers()
                    mcp = await _suite(
                        redis, inference, bare_args, general, (), MCP, progress, short, mcp_servers=servers
                    )
                    document += (
                        "\n"
                        + bare_section(bare, general, show_heldout=args.show_heldout)
                        + "\n"
                        + client_section(report, client)
                        + "\n"
                        + mcp_section(report, mcp)
                    )
                documents.append(document)
                print(_headline(report))
        args.out.write_text(_with_kept_sections("\n".join(documents), args.out), encoding="utf-8")
        print(f"wrote {args.out}")
    finally:
        await redis.aclose()
    return 0


def _with_kept_sections(report: str, out: Path) -> str:
    """The report, then the plain-chat section ``python -m evals.chat`` wrote in ``out`` (kept as it was), then
    the changelog of earlier reports (``evals/CHANGELOG.md``)."""
    old = out.read_text(encoding="utf-8") if out.exists() else ""
    parts = [report.rstrip("\n")]
    if CHAT_BEGIN in old and CHAT_END in old:
        parts.append(CHAT_BEGIN + old.split(CHAT_BEGIN, 1)[1].split(CHAT_END, 1)[0] + CHAT_END)
    if CHANGELOG.exists():
        parts.append(CHANGELOG.read_text(encoding="utf-8").rstrip("\n"))
    return "\n\n".join(parts) + "\n"


async def _suite(  # noqa: PLR0917 - one caller
    redis: aioredis.Redis,
    inference: str,
    args: EvalArgs,
    cases: Sequence[Case],
    extra_tools: Sequence[ToolDefinition],
    label: str,
    progress: Any,
    sampling: common_pb2.SamplingParams | None,
    client_tools: Sequence[common_pb2.ToolSpec] = (),
    mcp_servers: Sequence[McpServerConfig] = (),
) -> Report:
    """One suite's cases through a fresh mesh (its own tool executor and routers) on the shared engine;
    ``client_tools`` brought by every turn (run by the eval's client), ``mcp_servers`` mounted by its executor."""
    mesh = await start_eval_mesh(
        redis, inference, args.modes, extra_tools, label, mcp_servers=mcp_servers, router_flags=args.router_flags
    )
    try:
        print(f"evals: {len(cases)} cases × {len(mesh.stubs)} modes, one turn at a time", file=sys.stderr)
        return await run_eval(
            cases,
            mesh.stubs,
            turn_timeout_s=args.turn_timeout_s,
            progress=progress,
            sampling=sampling,
            client_tools=client_tools,
        )
    finally:
        await mesh.close()


def run_cli(
    run: Callable[[Any, list[str]], Coroutine[Any, Any, int]], parse: Callable[[list[str]], Any], argv: Any
) -> int:
    """An eval's entry point: parse ``argv`` (None: the command line), then ``run`` under uvloop; shared by
    ``make eval`` and ``evals.chat``.

    A SIGTERM (a killed run, a job timeout) ends the run as Ctrl-C does, so the mesh and the engine's worker
    processes are shut down; with Python's default the engine's workers outlived the run, using the CPU.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        return uvloop.run(run(args, argv))
    except KeyboardInterrupt:
        return 130


def main(argv: Sequence[str] | None = None) -> int:
    return run_cli(run, parse_args, argv)


if __name__ == "__main__":
    sys.exit(main())
