"""The tool executor on real grpc.aio servers: concurrency, guards, cache, cancellation, SSRF."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio
import pytest
import redis.asyncio as aioredis
from aiohttp import web

from agentmesh.common.v1 import common_pb2
from agentmesh.tools.v1 import tools_pb2, tools_pb2_grpc
from services.runtime.cache import TwoLevelCache
from services.runtime.metrics import Metrics
from services.runtime.server import MeshServer
from services.tools.builtin import default_tools
from services.tools.executor import BreakerPolicy, ToolExecutor
from services.tools.metrics import ToolMetrics
from services.tools.registry import ToolDefinition, ToolError, ToolRegistry
from services.tools.servicer import ToolExecutorServicer
from tests.conftest import StartServer
from tests.support.waiting import eventually

OpenChannel = Callable[..., grpc.aio.Channel]
S = common_pb2


@dataclass
class Probe:
    """Observations of the fake tools."""

    calls: dict[str, int] = field(default_factory=dict)
    running: int = 0
    max_running: int = 0
    all_three: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    started: asyncio.Event = field(default_factory=asyncio.Event)

    def count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1


def fake_tools(probe: Probe) -> list[ToolDefinition]:
    obj = {"type": "object"}

    async def together(args: dict[str, Any]) -> dict[str, Any]:
        # Succeeds only if three calls run at the same time (proof of concurrency without timing).
        probe.count("together")
        probe.running += 1
        probe.max_running = max(probe.max_running, probe.running)
        if probe.running == 3:
            probe.all_three.set()
        try:
            await asyncio.wait_for(probe.all_three.wait(), 5)
            await asyncio.sleep(0.3)
            return {"n": args.get("n")}
        finally:
            probe.running -= 1

    async def sleepy(args: dict[str, Any]) -> None:
        probe.count("sleepy")
        await asyncio.sleep(10)

    async def flaky(args: dict[str, Any]) -> None:
        probe.count("flaky")
        raise ConnectionError("backend down")

    async def flaky_write(args: dict[str, Any]) -> None:
        probe.count("flaky_write")
        raise ConnectionError("backend down")

    async def picky(args: dict[str, Any]) -> None:
        probe.count("picky")
        raise ToolError("that input makes no sense")

    async def counted(args: dict[str, Any]) -> dict[str, Any]:
        probe.count("counted")
        return {"echo": args}

    async def forever(args: dict[str, Any]) -> None:
        probe.count("forever")
        probe.started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            probe.cancelled.set()
            raise

    return [
        ToolDefinition("together", "", obj, together, timeout_s=6),
        ToolDefinition("sleepy", "", obj, sleepy, timeout_s=0.2, max_attempts=1),
        ToolDefinition("flaky", "", obj, flaky, timeout_s=1, max_attempts=3),
        ToolDefinition("flaky_write", "", obj, flaky_write, timeout_s=1, max_attempts=3, idempotent=False),
        ToolDefinition("picky", "", obj, picky, max_attempts=3),
        ToolDefinition("counted", "", obj, counted, cache_ttl_s=60),
        ToolDefinition("forever", "", obj, forever, timeout_s=3600, max_attempts=1),
    ]


class Stream:
    """An Execute call with results collected by call id."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.call = tools_pb2_grpc.ToolExecutorServiceStub(channel).Execute()
        self.results: dict[str, tools_pb2.ToolResult] = {}
        self.order: list[str] = []
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self.call:
            self.results[message.result.call_id] = message.result
            self.order.append(message.result.call_id)

    async def send(self, call_id: str, tool: str, args: Any = None, **kw: Any) -> None:
        arguments = args if isinstance(args, str) else json.dumps(args or {})
        call = tools_pb2.ToolCall(call_id=call_id, tool_name=tool, arguments_json=arguments, **kw)
        await self.call.write(tools_pb2.ExecuteRequest(call=call))

    async def cancel_call(self, call_id: str) -> None:
        await self.call.write(tools_pb2.ExecuteRequest(cancel=tools_pb2.CancelToolCall(call_id=call_id)))

    async def wait(self, *ids: str, within_s: float = 10) -> None:
        await eventually(lambda: all(i in self.results for i in ids), within_s, f"results {ids}")

    async def close(self) -> None:
        await self.call.done_writing()
        await asyncio.wait_for(self._reader, 10)


@dataclass
class Executor:
    probe: Probe
    executor: ToolExecutor
    channel: grpc.aio.Channel
    metrics: Metrics
    address: str
    server: MeshServer


async def start_executor(
    start_server: StartServer,
    open_channel: OpenChannel,
    probe: Probe,
    *,
    redis: aioredis.Redis | None = None,
    extra: Sequence[ToolDefinition] = (),
) -> Executor:
    metrics = Metrics()
    executor = ToolExecutor(
        ToolRegistry([*fake_tools(probe), *extra]),
        cache=TwoLevelCache("test:tools:", redis),
        metrics=ToolMetrics(metrics),
        breaker=BreakerPolicy(failure_threshold=3, reset_timeout_s=0.3),
        backoff=lambda attempt: 0.01,
    )
    server = await start_server([ToolExecutorServicer(executor).service()], metrics=metrics)
    return Executor(probe, executor, open_channel(server.address), metrics, server.address, server)


@pytest.fixture
async def ex(start_server: StartServer, open_channel: OpenChannel) -> Executor:
    return await start_executor(start_server, open_channel, Probe())


async def test_three_calls_run_concurrently(ex: Executor) -> None:
    stream = Stream(ex.channel)
    for i in range(3):
        await stream.send(f"c{i}", "together", {"n": i})
    await stream.wait("c0", "c1", "c2")
    await stream.close()
    assert [stream.results[f"c{i}"].status for i in range(3)] == [S.TOOL_CALL_STATUS_OK] * 3
    assert ex.probe.max_running == 3
    latencies = [stream.results[f"c{i}"].latency.ToNanoseconds() / 1e9 for i in range(3)]
    assert max(latencies) < 3 * 0.3  # together they take about one call's time, not three


async def test_timeout_is_reported_while_others_succeed(ex: Executor) -> None:
    stream = Stream(ex.channel)
    await stream.send("slow", "sleepy")
    await stream.send("fast", "counted", {"x": 1})
    await stream.wait("slow", "fast")
    await stream.close()
    assert stream.results["slow"].status == S.TOOL_CALL_STATUS_TIMEOUT
    assert "timed out after 0.2 s" in stream.results["slow"].error_message
    assert stream.results["fast"].status == S.TOOL_CALL_STATUS_OK
    assert stream.order.index("fast") < stream.order.index("slow")  # out of order, as they finish


async def test_retries_only_for_idempotent_tools_and_stop_at_the_limit(ex: Executor) -> None:
    stream = Stream(ex.channel)
    await stream.send("idem", "flaky")
    await stream.wait("idem")
    await stream.send("once", "flaky_write")
    await stream.send("semantic", "picky")
    await stream.wait("once", "semantic")
    await stream.close()
    assert stream.results["idem"].status == S.TOOL_CALL_STATUS_FAILED
    assert stream.results["idem"].attempts == 3 and ex.probe.calls["flaky"] == 3
    assert "ConnectionError: backend down" in stream.results["idem"].error_message
    assert stream.results["once"].attempts == 1 and ex.probe.calls["flaky_write"] == 1
    # A ToolError is an answer, not an outage: no retry.
    assert stream.results["semantic"].error_message == "that input makes no sense"
    assert ex.probe.calls["picky"] == 1
    retries = ex.metrics.registry.get_sample_value("agentmesh_tool_retries_total", {"tool": "flaky"})
    assert retries == 2


async def test_breaker_opens_after_failures_and_half_opens_later(ex: Executor) -> None:
    stream = Stream(ex.channel)
    await stream.send("f1", "flaky")  # three failed attempts: the breaker (threshold 3) opens
    await stream.wait("f1")
    state = ex.metrics.registry.get_sample_value("agentmesh_tool_circuit_breaker_state", {"tool": "flaky"})
    assert state == 2
    await stream.send("f2", "flaky")
    await stream.wait("f2")
    assert stream.results["f2"].status == S.TOOL_CALL_STATUS_UNAVAILABLE
    assert "circuit open" in stream.results["f2"].error_message
    assert ex.probe.calls["flaky"] == 3  # the open breaker did not call the tool
    await asyncio.sleep(0.35)  # reset timeout 0.3 s: the next call is a half-open probe
    await stream.send("f3", "flaky")
    await stream.wait("f3")
    assert stream.results["f3"].attempts == 1 and ex.probe.calls["flaky"] == 4
    await stream.close()


async def test_cache_hits_skip_execution_across_two_instances(
    start_server: StartServer, open_channel: OpenChannel, redis_client: aioredis.Redis
) -> None:
    probe = Probe()
    first = await start_executor(start_server, open_channel, probe, redis=redis_client)
    second = await start_executor(start_server, open_channel, probe, redis=redis_client)
    s1, s2 = Stream(first.channel), Stream(second.channel)
    await s1.send("a", "counted", {"q": 1, "z": [1, 2]})
    await s1.wait("a")
    await s2.send("b", "counted", '{"z": [1, 2], "q": 1}')  # same arguments, other key order
    await s2.send("c", "counted", {"q": 1, "z": [1, 2]}, bypass_cache=True)
    await s2.wait("b", "c")
    await s1.close()
    await s2.close()
    assert probe.calls["counted"] == 2  # a and the bypassing c
    assert not s1.results["a"].cached and s2.results["b"].cached and not s2.results["c"].cached
    assert s2.results["b"].output_json == s1.results["a"].output_json and s2.results["b"].attempts == 0
    ratio = second.metrics.registry.get_sample_value("agentmesh_tool_cache_hit_ratio", {"tool": "counted"})
    assert ratio == 1.0


async def test_cancel_by_id_stops_the_running_tool(ex: Executor) -> None:
    stream = Stream(ex.channel)
    await stream.send("long", "forever")
    await asyncio.wait_for(ex.probe.started.wait(), 5)
    await stream.cancel_call("long")
    await stream.cancel_call("unknown-id")  # ignored
    await stream.wait("long")
    assert stream.results["long"].status == S.TOOL_CALL_STATUS_CANCELLED
    await asyncio.wait_for(ex.probe.cancelled.wait(), 5)
    await stream.close()


async def test_dropping_the_stream_stops_the_running_tool(ex: Executor) -> None:
    stream = Stream(ex.channel)
    await stream.send("long", "forever")
    await asyncio.wait_for(ex.probe.started.wait(), 5)
    stream.call.cancel()
    await asyncio.wait_for(ex.probe.cancelled.wait(), 5)
    await eventually(
        lambda: ex.metrics.registry.get_sample_value("agentmesh_tool_calls_in_flight", {"tool": "forever"}) == 0
    )


async def test_bad_calls_get_clear_per_call_errors(ex: Executor) -> None:
    stream = Stream(ex.channel)
    await stream.send("u", "no_such_tool")
    await stream.send("j", "counted", "{not json")
    await stream.send("big", "counted", json.dumps({"x": "y" * 70_000}))
    await stream.send("", "counted")
    await stream.wait("u", "j", "big", "")
    await stream.send("after", "counted", {"ok": True})
    await stream.wait("after")
    await stream.close()
    assert stream.results["u"].status == S.TOOL_CALL_STATUS_NOT_FOUND
    assert "no tool named 'no_such_tool'" in stream.results["u"].error_message
    assert stream.results["j"].status == S.TOOL_CALL_STATUS_INVALID_ARGUMENT
    assert "not valid JSON" in stream.results["j"].error_message
    assert "larger than 65536 bytes" in stream.results["big"].error_message
    assert stream.results[""].error_field == "call_id"
    assert stream.results["after"].status == S.TOOL_CALL_STATUS_OK


async def test_schema_violation_reports_the_json_pointer(start_server: StartServer, open_channel: OpenChannel) -> None:
    ex = await start_executor(start_server, open_channel, Probe(), extra=default_tools())
    stream = Stream(ex.channel)
    await stream.send("bad", "unit_convert", {"quantity": 10, "to_unit": "mi"})
    await stream.send("calc", "calculator", {"expression": "23*47"})
    await stream.send("evil", "calculator", {"expression": "__import__('os').system('true')"})
    await stream.wait("bad", "calc", "evil")
    await stream.close()
    assert stream.results["bad"].status == S.TOOL_CALL_STATUS_INVALID_ARGUMENT
    assert stream.results["bad"].error_field == "/quantity"
    assert json.loads(stream.results["calc"].output_json)["result"] == 1081
    assert stream.results["evil"].status == S.TOOL_CALL_STATUS_FAILED
    stub = tools_pb2_grpc.ToolExecutorServiceStub(ex.channel)
    names = {t.name for t in (await stub.ListTools(tools_pb2.ListToolsRequest())).tools}
    assert {"calculator", "clock", "unit_convert", "kb_search", "http_get"} <= names


@pytest.fixture
async def web_server() -> AsyncIterator[str]:
    async def page(request: web.Request) -> web.Response:
        return web.Response(text="hello from loopback")

    async def away(request: web.Request) -> web.Response:
        raise web.HTTPFound(request.query["to"])

    async def huge(request: web.Request) -> web.Response:
        return web.Response(text="x" * 300_000)

    app = web.Application()
    app.add_routes([web.get("/page", page), web.get("/away", away), web.get("/huge", huge)])
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"127.0.0.1:{port}"
    await runner.cleanup()


async def test_http_get_allows_only_the_allowlist(
    start_server: StartServer, open_channel: OpenChannel, web_server: str
) -> None:
    ex = await start_executor(start_server, open_channel, Probe(), extra=default_tools(http_allowlist=["127.0.0.1"]))
    port = web_server.split(":")[1]
    cases = {
        "ok": f"http://{web_server}/page",
        "other-host": "http://example.com/",
        "localhost-name": f"http://localhost:{port}/page",
        "redirect-out": f"http://{web_server}/away?to=http://example.com/",
        "redirect-meta": f"http://{web_server}/away?to=http://169.254.169.254/latest",
        "redirect-in": f"http://{web_server}/away?to=/page",
        "too-big": f"http://{web_server}/huge",
        "scheme": "file:///etc/passwd",
    }
    stream = Stream(ex.channel)
    for cid, url in cases.items():
        await stream.send(cid, "http_get", {"url": url}, bypass_cache=True)
    await stream.wait(*cases, within_s=20)
    await stream.close()
    out = {cid: stream.results[cid] for cid in cases}
    assert json.loads(out["ok"].output_json)["text"] == "hello from loopback"
    assert json.loads(out["redirect-in"].output_json)["text"] == "hello from loopback"
    assert "'example.com' is not on the allowlist" in out["other-host"].error_message
    assert "'localhost' is not on the allowlist" in out["localhost-name"].error_message
    assert "'example.com' is not on the allowlist" in out["redirect-out"].error_message
    assert "'169.254.169.254' is not on the allowlist" in out["redirect-meta"].error_message
    assert "larger than" in out["too-big"].error_message
    assert "only http and https" in out["scheme"].error_message
    for cid in cases:
        if cid not in ("ok", "redirect-in"):
            assert out[cid].status == S.TOOL_CALL_STATUS_FAILED, cid


async def test_allowlisted_name_resolving_to_a_private_address_is_refused(
    start_server: StartServer, open_channel: OpenChannel, web_server: str
) -> None:
    # "localhost" is allowed by name, but it resolves to 127.0.0.1, which is not: DNS results are checked.
    ex = await start_executor(start_server, open_channel, Probe(), extra=default_tools(http_allowlist=["localhost"]))
    port = web_server.split(":")[1]
    stream = Stream(ex.channel)
    await stream.send("rebind", "http_get", {"url": f"http://localhost:{port}/page"})
    await stream.wait("rebind")
    await stream.close()
    assert "resolves to 127.0.0.1, which is not allowed" in stream.results["rebind"].error_message


async def test_router_link_survives_callers_cancelled_mid_submit(ex: Executor, open_channel: OpenChannel) -> None:
    # grpc.aio cancels the whole call when a task awaiting its write is cancelled; the router's multiplexed link
    # must not let one caller's cancel take down the stream every other call shares (runtime/mux_client.py).
    from services.router.tools.link import ExecuteStream

    link = ExecuteStream(ex.address, open_channel)
    lost: list[str] = []
    original_lost = link.lost

    def record(why: str, was_connected: bool) -> None:
        lost.append(why)
        original_lost(why, was_connected)

    link.lost = record  # type: ignore[method-assign]
    link.start()
    try:
        assert await link.wait_connected(10)
        for i in range(40):
            call = tools_pb2.ToolCall(call_id=f"c{i}", tool_name="forever", arguments_json="{}")
            task = asyncio.create_task(link.call(call))
            for _ in range(i % 4):  # cancel at different points: before, during and after the write
                await asyncio.sleep(0)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        ok = tools_pb2.ToolCall(call_id="after", tool_name="counted", arguments_json='{"q": 1}')
        result = await asyncio.wait_for(link.call(ok), 10)
        assert result.status == S.TOOL_CALL_STATUS_OK, result.error_message
        assert link.connected and lost == []
        await eventually(lambda: link.in_flight == 0, 5, "every cancelled call released")
    finally:
        await link.close()


async def test_router_link_fails_calls_at_once_after_the_executor_left(ex: Executor, open_channel: OpenChannel) -> None:
    # At start-up a call waits for an executor to connect; once the one it had went away (drained, killed), every
    # call fails in band as UNAVAILABLE at once: a turn during an outage must not spend seconds per call waiting.
    from services.router.tools.link import ToolsLink

    link = ToolsLink(ex.address, open_channel)
    link.start()
    try:
        ok = tools_pb2.ToolCall(call_id="before", tool_name="counted", arguments_json='{"q": 1}')
        assert (await link.call(ok, connect_within_s=10)).status == S.TOOL_CALL_STATUS_OK
        assert not link.down
        await ex.server.drain(0)
        await eventually(lambda: link.down, 10, "the executor seen gone")
        gone = tools_pb2.ToolCall(call_id="after", tool_name="counted", arguments_json='{"q": 2}')
        async with asyncio.timeout(5):  # a wait for a connection would last the whole 60 s asked for
            result = await link.call(gone, connect_within_s=60)
        assert result.status == S.TOOL_CALL_STATUS_UNAVAILABLE, result
    finally:
        await link.close()
