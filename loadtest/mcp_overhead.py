"""What an MCP tool costs over a built-in one, through the tool executor's Execute stream (issue 31).

``python -m loadtest.mcp_overhead [--calls 400] [--concurrent 50] [--nap-ms 100]``

The tool executor runs as a process (``python -m services.tools``) with two
MCP servers of ``loadtest/mcp_server.py`` mounted: one over stdio (``bs``) and
one over streamable HTTP on loopback (``bh``, its own process). This process
is the client, on one Execute stream, as the router is:

- **sequential** — ``--calls`` calls, one at a time, of the built-in
  ``calculator`` (``2+3``), ``bs__echo`` and ``bh__echo``, interleaved call by
  call so machine noise hits all three; every call bypasses the result cache.
  Latency is the client's: ToolCall written → ToolResult read. The MCP overhead
  is the MCP tool's percentile minus the built-in's.
- **concurrent** — ``--concurrent`` calls written at once to one server (its
  ``max_concurrency`` is set to that many): ``echo`` (protocol throughput) and
  ``nap`` of ``--nap-ms`` (do the calls overlap?), per transport: wall time of
  the batch and per-call p50/p99.

Results print as markdown tables.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc.aio

from agentmesh.common.v1 import common_pb2
from agentmesh.tools.v1 import tools_pb2, tools_pb2_grpc
from loadtest.stats import percentile
from meshkit.up import free_port
from services.runtime.health import wait_serving

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "loadtest" / "mcp_server.py"


class Stream:
    """One Execute stream; ``call`` waits for its result."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._call = tools_pb2_grpc.ToolExecutorServiceStub(channel).Execute()
        self._waiting: dict[str, asyncio.Future[tools_pb2.ToolResult]] = {}
        self._writing = asyncio.Lock()  # grpc.aio: one write in flight per call
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self._call:
            if message.HasField("result"):
                future = self._waiting.pop(message.result.call_id, None)
                if future is not None:
                    future.set_result(message.result)

    async def call(self, tool: str, args: dict[str, Any]) -> float:
        """Seconds from write to result; raises if the call did not succeed."""
        call_id = uuid.uuid4().hex
        future: asyncio.Future[tools_pb2.ToolResult] = asyncio.get_running_loop().create_future()
        self._waiting[call_id] = future
        start = time.perf_counter()
        call = tools_pb2.ToolCall(call_id=call_id, tool_name=tool, arguments_json=json.dumps(args), bypass_cache=True)
        async with self._writing:
            await self._call.write(tools_pb2.ExecuteRequest(call=call))
        result = await future
        elapsed = time.perf_counter() - start
        if result.status != common_pb2.TOOL_CALL_STATUS_OK:
            raise RuntimeError(f"{tool}: {common_pb2.ToolCallStatus.Name(result.status)} {result.error_message}")
        return elapsed

    async def close(self) -> None:
        await self._call.done_writing()
        await self._reader


def ms(values: list[float], q: float) -> str:
    return f"{percentile(values, q) * 1000:.2f}"


async def sequential(stream: Stream, calls: int) -> None:
    kinds: dict[str, tuple[str, Callable[[int], dict[str, Any]]]] = {
        "built-in (calculator)": ("calculator", lambda i: {"expression": f"{i}+3"}),
        "MCP stdio (bs__echo)": ("bs__echo", lambda i: {"n": i}),
        "MCP streamable HTTP (bh__echo)": ("bh__echo", lambda i: {"n": i}),
    }
    samples: dict[str, list[float]] = {k: [] for k in kinds}
    for i in range(calls + 20):
        for kind, (tool, args) in kinds.items():
            elapsed = await stream.call(tool, args(i))
            if i >= 20:  # the first calls warm up connections and validators
                samples[kind].append(elapsed)
    base = samples["built-in (calculator)"]
    print(f"\nSequential, {calls} calls each (ms, client-observed ToolCall → ToolResult):\n")
    print("| tool | p50 | p99 | mean | overhead p50 | overhead p99 |")
    print("|---|---|---|---|---|---|")
    for kind, values in samples.items():
        over50 = (percentile(values, 50) - percentile(base, 50)) * 1000
        over99 = (percentile(values, 99) - percentile(base, 99)) * 1000
        overhead = ("—", "—") if values is base else (f"{over50:+.2f}", f"{over99:+.2f}")
        print(
            f"| {kind} | {ms(values, 50)} | {ms(values, 99)} | {statistics.fmean(values) * 1000:.2f}"
            f" | {overhead[0]} | {overhead[1]} |"
        )


async def concurrent(stream: Stream, n: int, nap_ms: int) -> None:
    print(f"\n{n} concurrent calls to one server (wall ms for the batch; per-call ms):\n")
    print("| transport | tool | batch wall | per-call p50 | per-call p99 |")
    print("|---|---|---|---|---|")
    for prefix, transport in (("bs", "stdio"), ("bh", "streamable HTTP")):
        for tool, args in (("echo", {"n": 1}), ("nap", {"ms": nap_ms})):
            await stream.call(f"{prefix}__{tool}", args)  # warm
            start = time.perf_counter()
            latencies = await asyncio.gather(*(stream.call(f"{prefix}__{tool}", args) for _ in range(n)))
            wall = time.perf_counter() - start
            label = tool if tool == "echo" else f"nap {nap_ms} ms"
            print(
                f"| {transport} | {label} | {wall * 1000:.1f} | {ms(list(latencies), 50)} | {ms(list(latencies), 99)} |"
            )


async def main(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="mcp-bench-"))
    http_port, tools_port = free_port(), free_port()
    http = await asyncio.create_subprocess_exec(
        sys.executable, str(SERVER), "--http", str(http_port), stderr=(folder / "http.log").open("wb")
    )
    keys = {"max_concurrency": args.concurrent, "timeout_s": 30}
    config = {
        "mcpServers": {
            "bs": {"command": sys.executable, "args": [str(SERVER)], **keys},
            "bh": {"url": f"http://127.0.0.1:{http_port}/mcp", **keys},
        }
    }
    (folder / "servers.json").write_text(json.dumps(config))
    await asyncio.sleep(1.5)  # the HTTP server's start; the executor retries a server that is not up yet anyway
    argv = ["-m", "services.tools", "--port", str(tools_port), "--metrics-port", "-1", "--log-level", "warning"]
    argv += ["--mcp-config", str(folder / "servers.json"), "--redis-required", "false"]
    tools = await asyncio.create_subprocess_exec(
        sys.executable, *argv, cwd=ROOT, stderr=(folder / "tools.log").open("wb")
    )
    try:
        await wait_serving(f"127.0.0.1:{tools_port}", within_s=60)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{tools_port}") as channel:
            stream = Stream(channel)
            names = {
                t.name
                for t in (
                    await tools_pb2_grpc.ToolExecutorServiceStub(channel).ListTools(tools_pb2.ListToolsRequest())
                ).tools
            }
            if not {"bs__echo", "bh__echo"} <= names:
                raise SystemExit(f"the MCP servers did not mount: {sorted(names)} (logs in {folder})")
            await sequential(stream, args.calls)
            await concurrent(stream, args.concurrent, args.nap_ms)
            await stream.close()
    finally:
        for process in (tools, http):
            process.terminate()
            await process.wait()


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--concurrent", type=int, default=50)
    parser.add_argument("--nap-ms", type=int, default=100)
    asyncio.run(main(parser.parse_args()))


if __name__ == "__main__":
    cli()
