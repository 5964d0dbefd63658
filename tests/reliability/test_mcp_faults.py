"""MCP servers that fail, against the tool executor: real server processes, and the executor as a process too.

Each fault is one clear error and nothing else affected: a bad config stops the
executor before it listens; a server killed mid-call fails that call at once in
band and comes back by itself; a hung tool times out, then its breaker opens
while the server's other tools work; a server that never initialises, or that
writes something that is not JSON-RPC, is logged once and restarted.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import random
import signal
import sys
import time
from pathlib import Path

import grpc.aio
import pytest

from agentmesh.common.v1 import common_pb2
from agentmesh.tools.v1 import tools_pb2, tools_pb2_grpc
from services.tools.executor import BreakerPolicy
from tests.support.mcp_servers.harness import (
    CHATTY,
    SILENT,
    WORKBENCH,
    ExecuteClient,
    HttpWorkbench,
    http,
    mcp_executor,
    output,
    pids,
    stdio,
    wait_mark,
)
from tests.support.processes import ROOT, ServiceProcess, clean_env
from tests.support.waiting import eventually

S = common_pb2
CONNECTION_LOG = "services.tools.mcp.connection"
FAST_RESTART = {"restart_max_s": 0.5, "startup_timeout_s": 30}


async def until_available(channel: grpc.aio.Channel, tool: str, within_s: float = 90.0) -> None:
    """Wait until ListTools says ``tool``'s server is up (the executor serves before a slow server is)."""
    stub = tools_pb2_grpc.ToolExecutorServiceStub(channel)
    deadline = time.monotonic() + within_s
    while True:
        reply = await stub.ListTools(tools_pb2.ListToolsRequest(), timeout=10)
        if any(o.tool_name == tool and o.available for o in reply.origins):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{tool} did not become available within {within_s} s")
        await asyncio.sleep(0.1)


async def run_executor(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "services.tools",
        "--port",
        "0",
        "--metrics-port",
        "-1",
        "--redis-required",
        "false",
        *args,
        cwd=ROOT,
        env=clean_env(env),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        _, stderr = await asyncio.wait_for(process.communicate(), 60)
    except TimeoutError:
        process.kill()
        raise AssertionError("the executor started although its MCP config is wrong") from None
    assert process.returncode is not None
    return process.returncode, stderr.decode()


@pytest.mark.parametrize(
    ("server", "env", "expected"),
    [
        ({"comand": "npx"}, {}, "server 'cal': comand: unknown key"),
        ({"url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer ${env:CAL_TOKEN}"}}, {}, "CAL_TOKEN"),
        ({"command": "x", "timeout_s": 0, "env": {"K": "${env:CAL_TOKEN}"}}, {"CAL_TOKEN": "s3cr3t"}, "timeout_s"),
    ],
    ids=["unknown-key", "unset-secret", "bad-number-beside-a-secret"],
)
async def test_a_config_error_is_refused_at_start_in_one_line(
    tmp_path: Path, server: dict[str, object], env: dict[str, str], expected: str
) -> None:
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({"mcpServers": {"cal": server}}))
    code, stderr = await run_executor("--mcp-config", str(config), env=env)
    assert code == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tools: error: --mcp-config: "), stderr
    assert expected in lines[0] and str(config) in lines[0]
    assert "s3cr3t" not in stderr


async def test_a_stdio_server_killed_mid_call_fails_that_call_and_comes_back_by_itself(tmp_path: Path) -> None:
    """The executor as a process: the call in flight ends UNAVAILABLE at once; the server is started again and
    its tools answer, with no restart of the executor."""
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({"mcpServers": {"wb": stdio(WORKBENCH, tmp_path, **FAST_RESTART)}}))
    tools = ServiceProcess(
        "tools", "services.tools", ["--mcp-config", str(config), "--redis-required", "false"], tmp_path, clean_env()
    )
    await tools.start()
    channel = grpc.aio.insecure_channel(tools.address)
    client = ExecuteClient(channel)
    try:
        await until_available(channel, "wb__wait")
        await client.send("w", "wb__wait", {"tag": "killed"})
        await wait_mark(tmp_path, "started-killed")
        os.kill(pids(tmp_path)[0], signal.SIGKILL)
        failed = await client.result("w")
        assert failed.status == S.TOOL_CALL_STATUS_UNAVAILABLE, failed.error_message
        assert failed.error_reason == "MCP_SERVER_UNAVAILABLE" and "wb" in failed.error_message

        await eventually(lambda: len(pids(tmp_path)) >= 2, 60, "the server started again")
        a = random.randrange(10**9)  # never in a result cache (the executor's L2 is the machine's Redis)
        deadline = time.monotonic() + 60
        for i in itertools.count():  # calls fail at once while it restarts, then answer
            result = await client.run(f"a{i}", "wb__add", {"a": a, "b": 2})
            if result.status == S.TOOL_CALL_STATUS_OK or time.monotonic() > deadline:
                break
            assert result.status == S.TOOL_CALL_STATUS_UNAVAILABLE, result.error_message
            await asyncio.sleep(0.1)
        assert output(result) == {"result": a + 2} and not result.cached
        assert await tools.metric("agentmesh_mcp_server_up", server="wb") == 1, tools.log_tail()
        assert await tools.metric("agentmesh_mcp_server_restarts_total", server="wb") >= 1
        assert tools.running
        down = [
            line for line in tools.log_path.read_text().splitlines() if "MCP server wb" in line and "is down" in line
        ]
        assert len(down) == 1, down
    finally:
        await client.close()
        await channel.close()
        await tools.stop()


async def test_a_streamable_http_server_killed_mid_call_fails_that_call_and_comes_back(tmp_path: Path) -> None:
    workbench = HttpWorkbench(tmp_path)
    await workbench.start()
    try:
        async with mcp_executor({"wb": http(workbench.url, ping_interval_s=0.5, **FAST_RESTART)}) as ex:
            client = ExecuteClient(ex.channel)
            await client.send("w", "wb__wait", {"tag": "killed"})
            await wait_mark(tmp_path, "started-killed")
            await workbench.kill()
            failed = await client.result("w")
            assert failed.status == S.TOOL_CALL_STATUS_UNAVAILABLE, failed.error_message
            await eventually(lambda: ex.mount.connections["wb"].unavailable() != "", 60, "the server seen as down")
            refused = await client.run("r", "wb__add", {"a": 1, "b": 1})
            assert refused.status == S.TOOL_CALL_STATUS_UNAVAILABLE and refused.latency.ToNanoseconds() < 1e9

            await workbench.restart()  # the same port: the executor reconnects by itself
            await eventually(lambda: ex.mount.connections["wb"].unavailable() == "", 60, "the server back")
            back = await client.run("b", "wb__add", {"a": 1, "b": 1})
            assert back.status == S.TOOL_CALL_STATUS_OK and output(back) == {"result": 2}
            await client.close()
    finally:
        await workbench.kill()


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_hanging_tool_times_out_then_its_breaker_opens(transport: str, tmp_path: Path) -> None:
    workbench = HttpWorkbench(tmp_path)
    if transport == "http":
        await workbench.start()
    keys = {"timeout_s": 0.3}
    server = stdio(WORKBENCH, tmp_path, **keys) if transport == "stdio" else http(workbench.url, **keys)
    try:
        policy = BreakerPolicy(failure_threshold=2, reset_timeout_s=30)
        async with mcp_executor({"wb": server}, breaker=policy) as ex:
            client = ExecuteClient(ex.channel)
            for i in range(2):
                timed_out = await client.run(f"h{i}", "wb__hang", {})
                assert timed_out.status == S.TOOL_CALL_STATUS_TIMEOUT, timed_out.error_message
            open_ = await client.run("h2", "wb__hang", {})
            assert open_.status == S.TOOL_CALL_STATUS_UNAVAILABLE and "circuit open" in open_.error_message
            assert open_.attempts == 0
            fine = await client.run("a", "wb__add", {"a": 1, "b": 2})  # the breaker is the tool's, not the server's
            assert fine.status == S.TOOL_CALL_STATUS_OK
            await client.close()
    finally:
        await workbench.kill()


async def test_a_server_that_never_initialises_is_logged_once_and_its_calls_fail_at_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=CONNECTION_LOG)
    servers = {
        "mute": stdio(SILENT, tmp_path, startup_timeout_s=0.3, restart_max_s=0.3),
        "wb": stdio(WORKBENCH, tmp_path),
    }
    async with mcp_executor(servers, ready=False) as ex:
        mute = ex.mount.connections["mute"]
        await eventually(lambda: mute.restarts >= 2, 60, "two restarts of the mute server")
        assert not any(t.server == "mute" for t in ex.registry)
        client = ExecuteClient(ex.channel)
        result = await client.run("m", "mute__anything", {})
        assert result.status == S.TOOL_CALL_STATUS_UNAVAILABLE, result.error_message
        assert "did not initialise within 0.3 s" in result.error_message
        assert (await client.run("a", "wb__add", {"a": 1, "b": 2})).status == S.TOOL_CALL_STATUS_OK
        await client.close()
    down = [r for r in caplog.records if r.levelno >= logging.WARNING and "MCP server mute" in r.getMessage()]
    assert len(down) == 1 and "is down" in down[0].getMessage()


async def test_a_server_that_writes_something_not_json_rpc_is_restarted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=CONNECTION_LOG)
    async with mcp_executor({"chatty": stdio(CHATTY, tmp_path, **FAST_RESTART)}) as ex:
        chatty = ex.mount.connections["chatty"]
        await eventually(lambda: len(pids(tmp_path)) >= 2, 60, "a new server process")
        await eventually(lambda: chatty.unavailable() == "", 60, "the server back")
        client = ExecuteClient(ex.channel)
        echoed = await client.run("e", "chatty__echo", {"said": "hi"})
        assert echoed.status == S.TOOL_CALL_STATUS_OK and output(echoed) == {"text": '{"said": "hi"}'}
        await client.close()
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(messages) == 1, messages
    assert (
        "MCP server chatty" in messages[0] and "is down: it wrote a line to stdout that is not JSON-RPC" in messages[0]
    )
