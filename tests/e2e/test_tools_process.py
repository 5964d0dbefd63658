"""The tool executor as a process (`python -m services.tools`) with real Redis."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

from agentmesh.tools.v1 import tools_pb2, tools_pb2_grpc
from meshkit.up import free_port
from services.runtime.channel import create_channel
from services.runtime.health import wait_serving
from tests.conftest import REDIS_URL
from tests.support.turns import next_message

ROOT = Path(__file__).resolve().parents[2]


async def test_tools_process_runs_calculator_and_drains() -> None:
    port = free_port()
    proc = subprocess.Popen(  # noqa: ASYNC220 - starting it does not block; waits go through to_thread
        [sys.executable, "-m", "services.tools", "--port", str(port), "--metrics-port", "-1", "--redis-url", REDIS_URL],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        await wait_serving(f"127.0.0.1:{port}", within_s=30, still_starting=lambda: proc.poll() is None)
        async with create_channel(f"127.0.0.1:{port}") as channel:
            call = tools_pb2_grpc.ToolExecutorServiceStub(channel).Execute()
            args = json.dumps({"expression": "23*47"})
            await call.write(
                tools_pb2.ExecuteRequest(
                    call=tools_pb2.ToolCall(call_id="1", tool_name="calculator", arguments_json=args)
                )
            )
            reply = await next_message(call)
            await call.done_writing()
            assert json.loads(reply.result.output_json)["result"] == 1081
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 20) == 0
    finally:
        proc.kill()
        proc.communicate()


def test_unreachable_redis_is_one_line() -> None:
    port = free_port()
    result = subprocess.run(
        [sys.executable, "-m", "services.tools", "--port", "0", "--redis-url", f"redis://127.0.0.1:{port}/0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tools: error: Redis at redis://127.0.0.1:{port}/0 is unreachable")
