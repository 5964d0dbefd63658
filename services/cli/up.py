"""``agentmesh up``: run every service of the mesh locally as processes, the way ``make run`` does.

Starts, in dependency order, each as ``python -m services.<name>`` with its
log lines prefixed by a coloured name: the inference replica on vLLM (the
embedded model) plus ``--sim-replicas N`` simulator replicas, the tool executor
(mounting the MCP servers of ``--mcp-config FILE``, when given), the router
(pointed at every replica) and — once it exists — the gateway. Each is waited
on until its health says SERVING. Ctrl-C (or SIGTERM) sends SIGTERM to all of
them in reverse order, waits for their drains, and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

from services.runtime.config import ServiceConfig, load_config
from services.runtime.health import wait_serving
from services.runtime.tls import MeshTls

ROOT = Path(__file__).resolve().parents[2]
COLOURS = ["\033[36m", "\033[35m", "\033[33m", "\033[32m", "\033[34m", "\033[31m"]
RESET = "\033[0m"

#: The API key `agentmesh up` gives the gateway when none is configured (loopback development only).
DEV_API_KEY = "agentmesh-dev-key"

#: Default addresses, so docs, tools and tests agree.
GATEWAY_PORT, ROUTER_PORT, TOOLS_PORT, INFERENCE_PORT = 50051, 50052, 50053, 50054
GATEWAY_HTTP_PORT = 8080
METRICS = {"gateway": 9151, "router": 9152, "tools": 9153, "inference": 9154}


@dataclass
class Proc:
    name: str
    args: list[str]
    port: int
    colour: str
    process: asyncio.subprocess.Process | None = None
    pump: asyncio.Task[None] | None = field(default=None, repr=False)


def plan(args: argparse.Namespace) -> list[Proc]:
    """The processes to start, in order."""
    host = "127.0.0.1"
    procs: list[Proc] = []
    replicas: list[str] = []

    def add(name: str, module: str, port: int, metrics_port: int, *extra: str) -> None:
        metrics = metrics_port - METRICS["gateway"] + args.metrics_port_base if args.metrics else -1
        argv = [module, "--port", str(port), "--metrics-port", str(metrics), *extra]
        procs.append(Proc(name, argv, port, COLOURS[len(procs) % len(COLOURS)]))

    if not args.no_vllm:
        add("inference", "services.inference", args.inference_port, METRICS["inference"])
        replicas.append(f"{host}:{args.inference_port}")
    for i in range(args.sim_replicas):
        port = args.inference_port + 10 + i
        add(f"sim-{i}", "services.inference", port, 9160 + i, "--engine", "simulator")
        replicas.append(f"{host}:{port}")
    # An MCP config is given as an absolute path: the tool executor checks it (and refuses to start on a mistake).
    mcp = ["--mcp-config", str(Path(args.mcp_config).resolve())] if getattr(args, "mcp_config", "") else []
    add("tools", "services.tools", args.tools_port, METRICS["tools"], "--redis-url", args.redis_url, *mcp)
    add(
        "router",
        "services.router",
        args.router_port,
        METRICS["router"],
        "--inference",
        ",".join(replicas),
        "--tools",
        f"{host}:{args.tools_port}",
        "--redis-url",
        args.redis_url,
    )
    add(
        "gateway",
        "gateway",
        args.gateway_port,
        METRICS["gateway"],
        "--routers",
        f"{host}:{args.router_port}",
        "--redis-url",
        args.redis_url,
        "--http-port",
        str(args.gateway_http_port),
    )
    return procs


def port_clash(procs: list[Proc], http_port: int) -> str | None:
    """Two listeners given one port, said as flags; None when every port is its own. Checked before any start: a
    second server on a taken port fails, but the health probe for it reaches the first and reads SERVING."""
    taken: dict[int, str] = {}
    listeners = [(f"{p.name} port", p.port) for p in procs]
    listeners += [(f"{p.name} metrics port", int(p.args[p.args.index("--metrics-port") + 1])) for p in procs]
    listeners += [("gateway HTTP port", http_port)]
    for name, port in listeners:
        if port <= 0:
            continue
        if port in taken:
            return f"the {taken[port]} and the {name} are both {port}"
        taken[port] = name
    return None


async def _pump(proc: Proc, width: int) -> None:
    assert proc.process is not None and proc.process.stdout is not None
    prefix = f"{proc.colour}{proc.name:<{width}}{RESET} | " if sys.stdout.isatty() else f"{proc.name:<{width}} | "
    while line := await proc.process.stdout.readline():
        sys.stdout.write(prefix + line.decode(errors="replace"))
        sys.stdout.flush()


async def run(args: argparse.Namespace) -> int:
    procs = plan(args)
    if clash := port_clash(procs, args.gateway_http_port):
        print(f"agentmesh up: {clash}; give each service its own port", file=sys.stderr)
        return 2
    width = max(len(p.name) for p in procs)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if not env.get("AGENTMESH_GATEWAY_API_KEYS") and not env.get("AGENTMESH_GATEWAY_API_KEYS_FILE"):
        # A local development key, so `agentmesh chat` works out of the box on loopback.
        env["AGENTMESH_GATEWAY_API_KEYS"] = f"dev:{DEV_API_KEY}"
    # With AGENTMESH_TLS_* set every internal server takes only mesh peers: ask their health as one.
    mesh_tls = MeshTls.from_config(load_config(ServiceConfig, [], env))
    code = 0
    try:
        for p in procs:
            p.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                *p.args,
                cwd=ROOT,
                env=env,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
            p.pump = asyncio.create_task(_pump(p, width))

            def still_starting(process: asyncio.subprocess.Process = p.process) -> bool:
                return process.returncode is None

            ready = asyncio.ensure_future(
                wait_serving(
                    f"127.0.0.1:{p.port}",
                    within_s=args.start_timeout_s,
                    still_starting=still_starting,
                    tls=None if p.name == "gateway" else mesh_tls,
                )
            )
            stopping = asyncio.ensure_future(stop.wait())
            await asyncio.wait({ready, stopping}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if stop.is_set():
                ready.cancel()
                return 130
            try:
                ready.result()
            except (RuntimeError, TimeoutError) as exc:
                print(f"agentmesh up: {p.name} did not start: {exc}", file=sys.stderr)
                return 1
            print(f"agentmesh up: {p.name} is serving on 127.0.0.1:{p.port}", flush=True)
        entry = procs[-1]
        key_note = f" (API key: {DEV_API_KEY})" if env.get("AGENTMESH_GATEWAY_API_KEYS") == f"dev:{DEV_API_KEY}" else ""
        http = f", OpenAI API at http://127.0.0.1:{args.gateway_http_port}/v1" if args.gateway_http_port > 0 else ""
        print(
            f"agentmesh up: the mesh is up; {entry.name} at 127.0.0.1:{entry.port}{http}{key_note}. Ctrl-C stops it.",
            flush=True,
        )
        exits = [asyncio.ensure_future(p.process.wait()) for p in procs if p.process is not None]
        stopping = asyncio.ensure_future(stop.wait())
        done, _ = await asyncio.wait({stopping, *exits}, return_when=asyncio.FIRST_COMPLETED)
        if stopping not in done:
            died = next(p for p in procs if p.process is not None and p.process.returncode is not None)
            print(f"agentmesh up: {died.name} exited with {died.process.returncode}; stopping", file=sys.stderr)  # type: ignore[union-attr]
            code = 1
        return code
    finally:
        await shutdown(procs)


async def shutdown(procs: list[Proc], grace_s: float = 20.0) -> None:
    for p in reversed(procs):
        if p.process is not None and p.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                p.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(p.process.wait(), grace_s)
            except TimeoutError:
                p.process.kill()
                await p.process.wait()
        if p.pump is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(p.pump, 2)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sim-replicas", type=int, default=0, help="simulator inference replicas to add")
    parser.add_argument("--no-vllm", action="store_true", help="no vLLM replica (simulators only)")
    parser.add_argument("--redis-url", default=os.environ.get("AGENTMESH_REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument("--gateway-port", type=int, default=GATEWAY_PORT)
    parser.add_argument(
        "--gateway-http-port", type=int, default=GATEWAY_HTTP_PORT, help="OpenAI-compatible edge (-1: off)"
    )
    parser.add_argument("--router-port", type=int, default=ROUTER_PORT)
    parser.add_argument("--tools-port", type=int, default=TOOLS_PORT)
    parser.add_argument(
        "--mcp-config",
        default=os.environ.get("AGENTMESH_TOOLS_MCP_CONFIG", ""),
        help="MCP servers for the tool executor to mount (mcpServers JSON; see examples/mcp/servers.json)",
    )
    parser.add_argument("--inference-port", type=int, default=INFERENCE_PORT)
    parser.add_argument("--no-metrics", dest="metrics", action="store_false", help="no Prometheus ports")
    parser.add_argument(
        "--metrics-port-base",
        type=int,
        default=METRICS["gateway"],
        help="gateway's metrics port; router, tools, inference at +1, +2, +3; simulators from +9",
    )
    parser.add_argument("--start-timeout-s", type=float, default=300.0, help="per service")
