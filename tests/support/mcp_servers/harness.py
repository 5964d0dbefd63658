"""Test harness for MCP tools: the test servers' configs, an HTTP server process, an executor, an Execute client.

``mcp_executor(servers)`` is the tool executor as ``services/tools/build.py``
assembles it (built-ins, the MCP mount, the executor, the servicer on a real
grpc.aio server on 127.0.0.1:0), minus Redis. ``ExecuteClient`` keeps every
frame of one Execute stream in arrival order, so a test can check that no
progress frame follows its call's result.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc.aio
from google.protobuf.duration_pb2 import Duration
from opentelemetry import baggage, propagate
from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider

from agentmesh.tools.v1 import tools_pb2, tools_pb2_grpc
from meshkit.up import free_port
from services.runtime.cache import LruTtlCache, TwoLevelCache
from services.runtime.channel import create_channel
from services.runtime.config import ServiceConfig
from services.runtime.metrics import Metrics
from services.runtime.server import MeshServer
from services.runtime.tenancy import TENANT_BAGGAGE, TENANT_HEADER
from services.tools.builtin import default_tools
from services.tools.executor import BreakerPolicy, ToolExecutor
from services.tools.mcp.config import parse_mcp_config
from services.tools.mcp.connection import quiet_sdk_logs
from services.tools.mcp.mount import McpMount
from services.tools.metrics import ToolMetrics
from services.tools.registry import ToolRegistry
from services.tools.servicer import ToolExecutorServicer
from tests.support.waiting import eventually

HERE = Path(__file__).resolve().parent
WORKBENCH = HERE / "workbench.py"
PAGED = HERE / "paged.py"
SILENT = HERE / "silent.py"
CHATTY = HERE / "chatty.py"
STAGES = HERE / "stages.py"


def stdio(script: Path, marks: Path, **keys: Any) -> dict[str, Any]:
    """An ``mcpServers`` entry running ``script`` over stdio, leaving its marks in ``marks``."""
    return {"command": sys.executable, "args": [str(script)], "env": {"MCP_TEST_MARKS": str(marks)}, **keys}


def http(url: str, **keys: Any) -> dict[str, Any]:
    return {"url": url, **keys}


@dataclass
class HttpWorkbench:
    """``workbench.py --http PORT`` as a process: killed and started again on the same port by the fault cases."""

    marks: Path
    port: int = field(default_factory=free_port)
    process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    async def start(self, within_s: float = 60.0) -> None:
        env = {**os.environ, "MCP_TEST_MARKS": str(self.marks)}
        log = (self.marks / "http-server.log").open("ab")
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, str(WORKBENCH), "--http", str(self.port), env=env, stdout=log, stderr=log
        )
        log.close()
        deadline = time.monotonic() + within_s
        while not _listening(self.port):
            if self.process.returncode is not None or time.monotonic() > deadline:
                tail = (self.marks / "http-server.log").read_text(errors="replace")[-2000:]
                raise AssertionError(
                    f"the HTTP MCP server did not start on {self.port} (exit {self.process.returncode}):\n{tail}"
                )
            await asyncio.sleep(0.05)

    async def restart(self, tries: int = 3) -> None:
        """Start it again on its port; a loaded box has failed a start at times (rarely), so up to ``tries``."""
        for attempt in range(1, tries + 1):
            try:
                await self.start()
                return
            except AssertionError:
                await self.kill()
                if attempt == tries:
                    raise

    async def kill(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)
            await self.process.wait()


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class McpExecutor:
    registry: ToolRegistry
    mount: McpMount
    executor: ToolExecutor
    metrics: Metrics
    servicer: ToolExecutorServicer
    channel: grpc.aio.Channel
    address: str

    def stub(self) -> tools_pb2_grpc.ToolExecutorServiceAsyncStub:
        return tools_pb2_grpc.ToolExecutorServiceStub(self.channel)

    async def list_tools(self, tenant: str | None = None) -> tools_pb2.ListToolsResponse:
        metadata = ((TENANT_HEADER, tenant),) if tenant else ()
        reply: tools_pb2.ListToolsResponse = await self.stub().ListTools(
            tools_pb2.ListToolsRequest(), metadata=metadata, timeout=10
        )
        return reply


@contextlib.asynccontextmanager
async def mcp_executor(
    servers: dict[str, Any],
    *,
    breaker: BreakerPolicy | None = None,
    ready: bool = True,
    within_s: float = 90.0,
    tracer_provider: TracerProvider | None = None,
) -> AsyncIterator[McpExecutor]:
    """``ready``: wait until every server is up (a loaded box can take seconds per start); else only until each
    first attempt has ended, up or down."""
    configs = parse_mcp_config({"mcpServers": servers}, source="test", env=os.environ)
    registry = ToolRegistry(default_tools())
    metrics = Metrics()
    tool_metrics = ToolMetrics(metrics)
    mount = McpMount(configs, registry, tool_metrics)
    executor = ToolExecutor(
        registry,
        cache=TwoLevelCache("test:mcp:", None, LruTtlCache(1000)),
        metrics=tool_metrics,
        breaker=breaker or BreakerPolicy(failure_threshold=5, reset_timeout_s=10.0),
        backoff=lambda attempt: 0.01,
        unknown_tool=mount.unknown_tool,
    )
    quiet_sdk_logs(debug=False)  # as build.py does
    mount.start()
    server: MeshServer | None = None
    channel: grpc.aio.Channel | None = None
    try:
        if ready:
            await eventually(
                lambda: all(not c.unavailable() for c in mount.connections.values()), within_s, "every MCP server up"
            )
        else:
            await mount.settled(within_s)
        tracer = tracer_provider.get_tracer("agentmesh.tools") if tracer_provider is not None else None
        servicer = ToolExecutorServicer(executor, tracer)
        server = MeshServer(ServiceConfig(host="127.0.0.1", port=0), [servicer.service()], metrics=metrics)
        await server.start(serving=True)
        channel = create_channel(server.address)
        yield McpExecutor(registry, mount, executor, metrics, servicer, channel, server.address)
    finally:
        if channel is not None:
            await channel.close()
        if server is not None:
            await server.drain(grace=0)
        await mount.close()


def tenant_context(tenant: str) -> dict[str, str]:
    """A ToolCall's trace_context naming ``tenant`` in its baggage, as the router sends it."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=baggage.set_baggage(TENANT_BAGGAGE, tenant, Context()))
    return carrier


class ExecuteClient:
    """One Execute stream; ``frames`` holds ("result" | "progress", call_id) in arrival order."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.call = tools_pb2_grpc.ToolExecutorServiceStub(channel).Execute()
        self.results: dict[str, tools_pb2.ToolResult] = {}
        self.progress: dict[str, list[tools_pb2.ToolProgress]] = {}
        self.frames: list[tuple[str, str]] = []
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self.call:
            if message.HasField("progress"):
                self.progress.setdefault(message.progress.call_id, []).append(message.progress)
                self.frames.append(("progress", message.progress.call_id))
            if message.HasField("result"):
                self.results[message.result.call_id] = message.result
                self.frames.append(("result", message.result.call_id))

    async def send(
        self, call_id: str, tool: str, args: Any = None, *, tenant: str = "", timeout_s: float | None = None
    ) -> None:
        call = tools_pb2.ToolCall(
            call_id=call_id,
            tool_name=tool,
            arguments_json=json.dumps(args or {}),
            trace_context=tenant_context(tenant) if tenant else {},
        )
        if timeout_s is not None:
            call.timeout.CopyFrom(Duration(seconds=int(timeout_s), nanos=int(timeout_s % 1 * 1e9)))
        await self.call.write(tools_pb2.ExecuteRequest(call=call))

    async def cancel(self, call_id: str) -> None:
        await self.call.write(tools_pb2.ExecuteRequest(cancel=tools_pb2.CancelToolCall(call_id=call_id)))

    async def result(self, call_id: str, within_s: float = 60.0) -> tools_pb2.ToolResult:
        await eventually(lambda: call_id in self.results, within_s, f"the result of {call_id}")
        return self.results[call_id]

    async def run(self, call_id: str, tool: str, args: Any = None, **kw: Any) -> tools_pb2.ToolResult:
        await self.send(call_id, tool, args, **kw)
        return await self.result(call_id)

    async def close(self) -> None:
        await self.call.done_writing()
        await asyncio.wait_for(self._reader, 20)


def output(result: tools_pb2.ToolResult) -> Any:
    return json.loads(result.output_json)


async def wait_mark(marks: Path, name: str, within_s: float = 30.0) -> None:
    await eventually((marks / name).exists, within_s, f"mark {name}")


def pids(marks: Path) -> Sequence[int]:
    """The workbench's process ids, in start order."""
    files = sorted(marks.glob("pid-*"), key=lambda p: int(p.name.split("-")[1]))
    return [int(p.read_text()) for p in files]
