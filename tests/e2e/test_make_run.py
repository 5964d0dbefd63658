"""The mesh as a newcomer meets it: `agentmesh up` (what `make run` runs) with the real vLLM engine,
then `agentmesh chat --once`, `agentmesh complete`, grpcurl through the gateway, and every /metrics page."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from meshkit.up import UpPorts, up_argv, wait_until_up
from tests.support import monitoring
from tests.support.promql import bucket_bounds, exported_names

ROOT = Path(__file__).resolve().parents[2]
GRPCURL = str(Path(sys.executable).parent / "grpcurl")
AUTH = "authorization: Bearer agentmesh-dev-key"

pytestmark = pytest.mark.vllm


def free_block(size: int) -> int:
    """A base port with ``size`` free ports after it."""
    for base in range(39100, 60000, 50):
        try:
            socks = []
            for port in range(base, base + size):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port block")


@pytest.fixture(scope="module")
def mesh() -> Iterator[dict[str, int]]:
    up = UpPorts.free(http=True)
    ports: dict[str, int] = {k: v for k, v in dataclasses.asdict(up).items() if v is not None}
    metrics = free_block(4)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTMESH_GATEWAY_API_KEYS")}
    argv = up_argv(up, sim_replicas=None, metrics_base=metrics)  # the real engine, as make run starts it
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until_up(proc, within_s=300)
    except RuntimeError as exc:
        proc.kill()
        pytest.fail(str(exc))
    yield {**ports, "metrics": metrics}
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=90)
    assert proc.returncode == 0, out[-3000:]
    assert out.count("draining") >= 4


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "services.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def grpcurl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GRPCURL, "-plaintext", *args], capture_output=True, text=True, timeout=180, check=False)


def test_chat_once_calls_the_calculator_and_answers(mesh: dict[str, int]) -> None:
    result = cli("chat", "--once", "What is 23*47?", "--target", f"127.0.0.1:{mesh['gateway']}")
    assert result.returncode == 0, result.stderr
    assert '→ calculator {"expression":"23*47"}' in result.stdout
    assert '"result":1081' in result.stdout
    answer = result.stdout.split("):", 1)[1]
    assert "1081" in answer.replace(",", "")


def test_complete_streams_an_answer(mesh: dict[str, int]) -> None:
    result = cli("complete", "What is the capital of France?", "--target", f"127.0.0.1:{mesh['gateway']}")
    assert result.returncode == 0, result.stderr
    assert "Paris" in result.stdout


def test_grpcurl_lists_describes_and_calls_through_the_gateway(mesh: dict[str, int]) -> None:
    target = f"127.0.0.1:{mesh['gateway']}"
    listing = grpcurl(target, "list")
    assert listing.returncode == 0 and "agentmesh.agent.v1.AgentService" in listing.stdout.split()
    described = grpcurl(target, "describe", "agentmesh.agent.v1.AgentService")
    assert "rpc Complete ( .agentmesh.agent.v1.CompleteRequest )" in described.stdout
    call = grpcurl(
        "-H", AUTH, "-d", json.dumps({"prompt": "Say hello."}), target, "agentmesh.agent.v1.AgentService/Complete"
    )
    assert call.returncode == 0, call.stderr
    assert '"finished"' in call.stdout and '"text_delta"' in call.stdout
    turn = grpcurl(
        "-H",
        AUTH,
        "-d",
        json.dumps({"start_turn": {"message": "What is 12*12?"}}),
        target,
        "agentmesh.agent.v1.AgentService/Converse",
    )
    assert turn.returncode == 0, turn.stderr
    assert '"tool_call_finished"' in turn.stdout and "144" in turn.stdout
    denied = grpcurl("-d", json.dumps({"prompt": "hi"}), target, "agentmesh.agent.v1.AgentService/Complete")
    assert denied.returncode != 0 and "Unauthenticated" in denied.stderr


def test_the_openai_sdk_talks_to_the_http_edge(mesh: dict[str, int]) -> None:
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{mesh['http']}/v1", api_key="agentmesh-dev-key", max_retries=0)
    answer: Any = client.chat.completions.create(
        model="SmolLM2-135M-Instruct", messages=[{"role": "user", "content": "What is the capital of France?"}]
    )
    assert "Paris" in answer.choices[0].message.content
    stream: Any = client.chat.completions.create(
        model="agentmesh-agent", messages=[{"role": "user", "content": "What is 23*47?"}], stream=True
    )
    chunks = list(stream)
    tools = [c.model_extra["agentmesh"]["tool_call"] for c in chunks if (c.model_extra or {}).get("agentmesh")]
    assert [(t["phase"], t["name"]) for t in tools] == [("started", "calculator"), ("finished", "calculator")]
    assert '"result":1081' in tools[1]["output"]
    assert "1081" in "".join(c.choices[0].delta.content or "" for c in chunks if c.choices).replace(",", "")


def test_every_service_exposes_its_metrics(mesh: dict[str, int]) -> None:
    base = mesh["metrics"]
    expected = {
        base: [
            "agentmesh_gateway_admission_total",
            "agentmesh_gateway_queue_depth",
            "agentmesh_gateway_concurrency_limit",
            "agentmesh_rpc_server_handled_total",
        ],
        base + 1: [
            "agentmesh_router_turns_total",
            "agentmesh_router_replica_picks_total",
            "agentmesh_router_response_cache_lookups_total",
            "agentmesh_router_failovers_total",
        ],
        base + 2: [
            "agentmesh_tool_calls_total",
            "agentmesh_tool_circuit_breaker_state",
            "agentmesh_tool_cache_hit_ratio",
            "agentmesh_tool_calls_in_flight",
        ],
        # vLLM's own metrics, served beside ours; per-request latencies are not recomputed in Python.
        base + 3: [
            "vllm:time_to_first_token_seconds",
            "vllm:prompt_tokens_total",
            "vllm:prefix_cache_hits_total",
            "agentmesh_inference_queue_depth",
            "agentmesh_inference_prefix_cache_hit_ratio",
            "agentmesh_inference_requests_total",
        ],
    }
    for port, names in expected.items():
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        for name in names:
            assert name in body, (port, name)
        if port == base + 3:
            assert "agentmesh_inference_inter_token_latency_seconds" not in body


def test_the_dashboard_and_alerts_read_only_metrics_the_mesh_exports(mesh: dict[str, int]) -> None:
    """Every name in k8s/components/prometheus (dashboard and rules) is on a /metrics page of the mesh."""
    base = mesh["metrics"]
    pages = [
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        for port in range(base, base + 4)
    ]
    exported = set().union(*(exported_names(page) for page in pages))
    bounds: dict[str, set[str]] = {}
    for page in pages:
        for name, les in bucket_bounds(page).items():
            bounds.setdefault(name, set()).update(les)
    assert monitoring.unknown_names(exported) == []
    assert monitoring.unknown_buckets(bounds) == []
