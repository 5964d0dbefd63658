"""The suite's ``tools`` and ``wire`` sections: what one multiplexed stream carries and costs.

Each runs a single service in process behind one stream: ``tools`` issues
parallel calls on one Execute stream, ``wire`` measures bytes, messages and
CPU per token on one Generate stream with gzip and frame coalescing on or off.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import grpc

from agentmesh.tools.v1 import tools_pb2, tools_pb2_grpc
from loadtest.targets import InferenceTarget
from loadtest.workloads import BenchRequest
from meshkit.proxy import CountingProxy
from services.inference.servicer import InferenceServicer
from services.inference.session import SessionSettings
from services.inference.simulator import SimulatorEngine, SimulatorSettings
from services.runtime.config import ServiceConfig
from services.runtime.metrics import Metrics
from services.runtime.server import MeshServer
from services.tools.executor import ToolExecutor
from services.tools.registry import ToolDefinition, ToolRegistry
from services.tools.servicer import ToolExecutorServicer


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
            call = tools_pb2_grpc.ToolExecutorServiceStub(channel).Execute()
            start = time.perf_counter()
            for i in range(3):
                tool_call = tools_pb2.ToolCall(call_id=str(i), tool_name="nap", arguments_json=json.dumps({"n": i}))
                await call.write(tools_pb2.ExecuteRequest(call=tool_call))
            results: list[tools_pb2.ExecuteResponse] = []
            while len(results) < 3:
                reply = await call.read()
                if not isinstance(reply, tools_pb2.ExecuteResponse):
                    raise RuntimeError("the Execute stream ended before its three results")
                results.append(reply)
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
