"""MCP tools through the tool executor's gRPC face, against real MCP servers over stdio and streamable HTTP.

One executor per transport for the module: ``wb`` (the workbench, every tenant)
and ``private`` (the workbench again, tenant ``acme`` only). The cases that
change a server (list_changed) get their own.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc.aio
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentmesh.common.v1 import common_pb2
from agentmesh.tools.v1 import tools_pb2
from services.tools.executor import REASON_PERMISSION_DENIED
from services.tools.mcp.results import REASON_TOOL_ERROR
from tests.support.mcp_servers.harness import (
    PAGED,
    WORKBENCH,
    ExecuteClient,
    HttpWorkbench,
    McpExecutor,
    http,
    mcp_executor,
    output,
    stdio,
    wait_mark,
)
from tests.support.waiting import eventually

S = common_pb2
DENIED = common_pb2.TOOL_CALL_STATUS_PERMISSION_DENIED


@pytest.fixture(scope="module", params=["stdio", "http"])
async def mesh(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Mesh]:
    marks = tmp_path_factory.mktemp(f"marks-{request.param}")
    if request.param == "stdio":
        (marks / "private").mkdir()
        servers = {
            "wb": stdio(WORKBENCH, marks, max_output_bytes=4096),
            "private": stdio(WORKBENCH, marks / "private", tenants=["acme"]),
        }
        async with mcp_executor(servers) as ex:
            yield Mesh(ex, marks, request.param)
        return
    workbench = HttpWorkbench(marks)
    await workbench.start()
    try:
        servers = {
            "wb": http(workbench.url, max_output_bytes=4096),
            "private": http(workbench.url, tenants=["acme"]),
        }
        async with mcp_executor(servers) as ex:
            yield Mesh(ex, marks, request.param)
    finally:
        await workbench.kill()


class Mesh:
    def __init__(self, ex: McpExecutor, marks: Path, transport: str) -> None:
        self.ex = ex
        self.marks = marks
        self.transport = transport


@pytest.fixture
async def client(mesh: Mesh) -> AsyncIterator[ExecuteClient]:
    stream = ExecuteClient(mesh.ex.channel)
    yield stream
    await stream.close()


async def next_snapshot(watch: Any) -> tools_pb2.WatchToolsResponse:
    snapshot: tools_pb2.WatchToolsResponse = await asyncio.wait_for(watch.read(), 10)
    return snapshot


def tag() -> str:
    return uuid.uuid4().hex[:8]


async def test_listing_namespaces_the_servers_tools_beside_the_built_ins(mesh: Mesh) -> None:
    reply = await mesh.ex.list_tools("acme")
    by_name = dict(zip((t.name for t in reply.tools), reply.origins, strict=True))
    specs = {t.name: t for t in reply.tools}
    assert {"calculator", "wb__add", "wb__progress", "private__add"} <= set(by_name)
    assert by_name["calculator"].mcp_server == ""
    add = by_name["wb__add"]
    assert (add.mcp_server, add.mcp_tool_name, add.available, add.read_only) == ("wb", "add", True, True)
    assert by_name["wb__note"].read_only is False and by_name["wb__note"].destructive is True
    assert specs["wb__add"].description == "Add two integers."
    assert '"a"' in specs["wb__add"].parameters_json_schema
    assert specs["wb__add"].cache_ttl.seconds == 60 and specs["wb__note"].cache_ttl.seconds == 0
    assert specs["wb__add"].max_attempts == 3 and specs["wb__note"].max_attempts == 1
    assert specs["wb__add"].version.startswith("mcp-")
    assert reply.revision


async def test_a_tenant_outside_the_allow_list_neither_sees_nor_calls_its_tools(
    mesh: Mesh, client: ExecuteClient
) -> None:
    for tenant in ("other", None):
        names = {t.name for t in (await mesh.ex.list_tools(tenant)).tools}
        assert "wb__add" in names and not any(n.startswith("private__") for n in names), tenant
    assert (await mesh.ex.list_tools("other")).revision != (await mesh.ex.list_tools("acme")).revision

    denied = await client.run("d", "private__add", {"a": 1, "b": 2}, tenant="other")
    assert denied.status == DENIED and denied.error_reason == REASON_PERMISSION_DENIED
    anonymous = await client.run("n", "private__add", {"a": 1, "b": 2})
    assert anonymous.error_reason == REASON_PERMISSION_DENIED
    allowed = await client.run("a", "private__add", {"a": 1, "b": 2}, tenant="acme")
    assert allowed.status == S.TOOL_CALL_STATUS_OK and output(allowed) == {"result": 3}


async def test_a_call_returns_the_structured_content_and_is_error_reaches_the_model(client: ExecuteClient) -> None:
    ok = await client.run("ok", "wb__add", {"a": 20, "b": 3}, tenant="acme")
    assert ok.status == S.TOOL_CALL_STATUS_OK, ok.error_message
    assert output(ok) == {"result": 23} and ok.attempts == 1

    refused = await client.run("no", "wb__refuse", {"why": "the calendar is locked"}, tenant="acme")
    assert refused.status == S.TOOL_CALL_STATUS_FAILED
    assert refused.error_reason == REASON_TOOL_ERROR
    assert "refused: the calendar is locked" in refused.error_message and "MCP server wb" in refused.error_message
    assert refused.attempts == 1  # a tool error is an answer, not a fault: never retried

    invalid = await client.run("bad", "wb__add", {"a": "x"}, tenant="acme")
    assert invalid.status == S.TOOL_CALL_STATUS_INVALID_ARGUMENT and invalid.error_field == "/a"


async def test_progress_notifications_stream_as_frames_before_the_result(client: ExecuteClient) -> None:
    result = await client.run("p", "wb__progress", {"steps": 4}, tenant="acme")
    assert result.status == S.TOOL_CALL_STATUS_OK and output(result) == {"result": "4 steps done"}
    frames = client.progress["p"]
    assert frames, "no progress frame arrived"
    assert all(f.tool_name == "wb__progress" and f.total == 4 for f in frames)
    assert [f.progress for f in frames] == sorted(f.progress for f in frames)
    assert frames[-1].message.startswith("step ")
    assert client.frames.index(("result", "p")) == len([f for f in client.frames if f[1] == "p"]) - 1


async def test_a_cancelled_call_sends_notifications_cancelled_to_the_server(mesh: Mesh, client: ExecuteClient) -> None:
    t = tag()
    await client.send("w", "wb__wait", {"tag": t}, tenant="acme")
    await wait_mark(mesh.marks, f"started-{t}")
    await client.cancel("w")
    assert (await client.result("w")).status == S.TOOL_CALL_STATUS_CANCELLED
    await wait_mark(mesh.marks, f"cancelled-{t}")


async def test_a_timed_out_call_is_cancelled_at_the_server(mesh: Mesh, client: ExecuteClient) -> None:
    t = tag()
    result = await client.run("t", "wb__wait", {"tag": t}, tenant="acme", timeout_s=0.5)
    assert result.status == S.TOOL_CALL_STATUS_TIMEOUT and result.attempts == 1
    await wait_mark(mesh.marks, f"cancelled-{t}")


async def test_read_only_results_are_cached_per_tenant_and_others_never(client: ExecuteClient) -> None:
    first = await client.run("c1", "wb__counted", {}, tenant="acme")
    again = await client.run("c2", "wb__counted", {}, tenant="acme")
    other = await client.run("c3", "wb__counted", {}, tenant="beta")
    assert (first.cached, again.cached, other.cached) == (False, True, False)
    assert output(again) == output(first) and output(other) != output(first)
    notes = [await client.run(f"n{i}", "wb__note", {"text": "hi"}, tenant="acme") for i in range(2)]
    assert [n.cached for n in notes] == [False, False]


async def test_a_large_result_is_cut_with_a_note(client: ExecuteClient) -> None:
    result = await client.run("big", "wb__big", {"megabytes": 10}, tenant="acme")
    assert result.status == S.TOOL_CALL_STATUS_OK, result.error_message
    assert len(result.output_json.encode()) <= 4096
    assert "10485" in output(result)["truncated"] and output(result)["text"].startswith("xxx")


async def test_calls_run_concurrently_on_one_server(mesh: Mesh, client: ExecuteClient) -> None:
    tags = [tag() for _ in range(3)]
    for i, t in enumerate(tags):
        await client.send(f"w{i}", "wb__wait", {"tag": t}, tenant="acme")
    for t in tags:
        await wait_mark(mesh.marks, f"started-{t}")  # all three are running at once on the server
    for i in range(3):
        await client.cancel(f"w{i}")
    assert {(await client.result(f"w{i}")).status for i in range(3)} == {S.TOOL_CALL_STATUS_CANCELLED}


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_list_changed_refreshes_listtools_and_watchers(transport: str, tmp_path: Path) -> None:
    workbench = HttpWorkbench(tmp_path)
    if transport == "http":
        await workbench.start()
    server = stdio(WORKBENCH, tmp_path) if transport == "stdio" else http(workbench.url)
    try:
        async with mcp_executor({"wb": server}) as ex:
            watch = ex.stub().WatchTools(tools_pb2.WatchToolsRequest(), metadata=(("x-agentmesh-tenant", "acme"),))
            first = await next_snapshot(watch)
            assert "wb__extra" not in {t.name for t in first.tools.tools}
            client = ExecuteClient(ex.channel)
            assert (await client.run("g", "wb__grow", {}, tenant="acme")).status == S.TOOL_CALL_STATUS_OK
            second = await next_snapshot(watch)
            assert "wb__extra" in {t.name for t in second.tools.tools}
            assert second.tools.revision != first.tools.revision
            kept = {t.name: t.version for t in first.tools.tools}
            assert all(kept[t.name] == t.version for t in second.tools.tools if t.name in kept)
            assert "wb__extra" in {t.name for t in (await ex.list_tools("acme")).tools}
            doubled = await client.run("x", "wb__extra", {"x": 4}, tenant="acme")
            assert output(doubled) == {"result": 8}
            watch.cancel()
            await client.close()
    finally:
        await workbench.kill()


async def test_every_page_is_listed_and_a_bad_schema_skips_only_its_tool(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="services.tools.mcp")
    async with mcp_executor({"paged": stdio(PAGED, tmp_path)}) as ex:
        names = {t.name for t in (await ex.list_tools("acme")).tools if t.name.startswith("paged__")}
        assert names == {"paged__one", "paged__two", "paged__three_dotted"}
        client = ExecuteClient(ex.channel)
        dotted = await client.run("d", "paged__three_dotted", {"n": 7}, tenant="acme")
        assert output(dotted) == {"text": "three.dotted got 7"}
        await client.close()
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(skipped) == 1 and "'broken'" in skipped[0] and "not valid JSON Schema" in skipped[0]


async def test_allowed_and_denied_tools_and_a_prefix_shape_the_listing(tmp_path: Path) -> None:
    servers = {
        "wb": stdio(WORKBENCH, tmp_path, prefix="cal", allowed_tools=["add", "note", "refuse"], denied_tools=["note"])
    }
    async with mcp_executor(servers) as ex:
        names = {t.name for t in (await ex.list_tools("acme")).tools if t.name.startswith("cal__")}
        assert names == {"cal__add", "cal__refuse"}
        await eventually(lambda: ex.mount.connections["wb"].tools != [], 5, "a listing")


def example_servers() -> dict[str, Any]:
    """examples/mcp/servers.json as ``agentmesh up --mcp-config`` loads it, run from the repository root."""
    root = Path(__file__).resolve().parents[2]
    servers: dict[str, Any] = json.loads((root / "examples" / "mcp" / "servers.json").read_text())["mcpServers"]
    servers["warehouse"] = {**servers["warehouse"], "command": sys.executable, "cwd": str(root)}
    return servers


async def test_the_example_config_mounts_the_warehouse() -> None:
    servers = example_servers()
    async with mcp_executor(servers) as ex:
        names = {t.name for t in (await ex.list_tools("acme")).tools}
        assert {"warehouse__stock_level", "warehouse__list_items", "warehouse__reorder"} <= names
        client = ExecuteClient(ex.channel)
        stock = await client.run("s", "warehouse__stock_level", {"item": "widgets"}, tenant="acme")
        assert output(stock) == {"item": "widget", "in_stock": 140, "warehouse": "eu-west"}
        order = await client.run("o", "warehouse__reorder", {"item": "gadget", "quantity": 5}, tenant="acme")
        assert output(order)["order_id"] == "PO-0001"
        assert [p.message for p in client.progress["o"]][-1] == "confirming the order"
        unknown = await client.run("u", "warehouse__stock_level", {"item": "gizmo"}, tenant="acme")
        assert unknown.error_reason == REASON_TOOL_ERROR and "no item called 'gizmo'" in unknown.error_message
        await client.close()


async def test_spans_and_metrics_carry_the_server_and_a_watch_ends_when_the_executor_drains(
    tmp_path: Path, tracer_provider: TracerProvider, span_exporter: InMemorySpanExporter
) -> None:
    async with mcp_executor({"wb": stdio(WORKBENCH, tmp_path)}, tracer_provider=tracer_provider) as ex:
        client = ExecuteClient(ex.channel)
        assert (await client.run("a", "wb__add", {"a": 1, "b": 1})).status == S.TOOL_CALL_STATUS_OK
        await client.close()
        span = next(s for s in span_exporter.get_finished_spans() if s.name == "tool.execute")
        assert span.attributes is not None and span.attributes["agentmesh.mcp_server"] == "wb"
        labels = {"server": "wb", "tool": "wb__add", "status": "ok"}
        assert ex.metrics.registry.get_sample_value("agentmesh_mcp_tool_calls_total", labels) == 1
        assert ex.metrics.registry.get_sample_value("agentmesh_mcp_server_up", {"server": "wb"}) == 1

        watch = ex.stub().WatchTools(tools_pb2.WatchToolsRequest())
        await next_snapshot(watch)
        await ex.servicer.announce_draining()
        assert await asyncio.wait_for(watch.read(), 5) is grpc.aio.EOF
