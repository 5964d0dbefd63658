"""The inference service as a process (`python -m services.inference`), as `make run` starts it."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from meshkit.up import free_port
from services.runtime.channel import create_channel
from services.runtime.health import wait_serving
from tests.support.generate import GenerateStream, submit

ROOT = Path(__file__).resolve().parents[2]


async def test_simulator_process_serves_reports_metrics_and_drains() -> None:
    port, metrics_port = free_port(), free_port()
    proc = subprocess.Popen(  # noqa: ASYNC220 - starting it does not block; waits go through to_thread
        [
            sys.executable,
            "-m",
            "services.inference",
            "--engine",
            "simulator",
            "--port",
            str(port),
            "--metrics-port",
            str(metrics_port),
            "--sim-time-scale",
            "0.1",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        await wait_serving(f"127.0.0.1:{port}", within_s=30, still_starting=lambda: proc.poll() is None)
        async with create_channel(f"127.0.0.1:{port}") as channel:
            stream = GenerateStream(channel)
            await stream.send(submit("p", "hello mesh", max_tokens=5))
            await stream.wait("p")
            await stream.close()
            assert stream.got.result("p").usage.completion_tokens == 5
        body = await asyncio.to_thread(
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
        )
        for name in (
            "agentmesh_inference_time_to_first_token_seconds",
            "agentmesh_inference_inter_token_latency_seconds",
            "agentmesh_inference_e2e_latency_seconds",
            "agentmesh_inference_completion_tokens_total",
            "agentmesh_inference_cached_prompt_tokens_total",
            "agentmesh_inference_queue_depth",
            "agentmesh_inference_prefix_cache_hit_ratio",
            "agentmesh_rpc_server_handled_total",
        ):
            assert name in body, name
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 20) == 0
    finally:
        proc.kill()
        _, err = proc.communicate()
    assert "draining" in err


def test_bad_model_folder_is_one_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "services.inference", "--model", "/nonexistent/model"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "inference: error: --model: /nonexistent/model is not a model folder (run `make setup` to provision it)"
    )
