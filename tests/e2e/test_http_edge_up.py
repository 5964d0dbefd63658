"""The OpenAI-compatible edge of a mesh started the way ``make run`` starts it (``agentmesh up``, simulator
replicas to keep it quick), driven by the real ``openai`` SDK and curl: completions whole and streamed, an
agent turn that runs a tool, 401 without a key, 429 with Retry-After past the tenant's rate limit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest

from meshkit.up import UpPorts, up_argv, wait_until_up

ROOT = Path(__file__).resolve().parents[2]
MODEL = "SmolLM2-135M-Instruct"


@dataclass(frozen=True)
class Running:
    url: str
    key: str
    flood_key: str


@pytest.fixture(scope="module")
def mesh() -> Iterator[Running]:
    # Fresh tenants per run: budgets live in the shared Redis. 8 requests of burst, then one per 2 s.
    run = uuid.uuid4().hex[:8]
    key, flood_key = f"e2e-key-{run}", f"flood-key-{run}"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AGENTMESH_GATEWAY_")},
        "AGENTMESH_GATEWAY_API_KEYS": f"e2e{run}:{key},flood{run}:{flood_key}",
        "AGENTMESH_GATEWAY_RATE_BURST": "8",
        "AGENTMESH_GATEWAY_RATE_RPS": "0.5",
    }
    ports = UpPorts.free(http=True)
    http = ports.http
    argv = up_argv(ports)
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = wait_until_up(proc, within_s=180)
        assert f"OpenAI API at http://127.0.0.1:{http}/v1" in lines[-1]
        yield Running(f"http://127.0.0.1:{http}/v1", key, flood_key)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out[-3000:]
    finally:
        proc.kill()


def sdk(mesh: Running, key: str = "") -> Any:
    """The SDK's client, typed Any: its overloads want literal TypedDicts, these tests build bodies."""
    return openai.OpenAI(base_url=mesh.url, api_key=key or mesh.key, max_retries=0, timeout=60)


def curl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["curl", "-sN", *args], capture_output=True, text=True, timeout=60, check=False)


def test_completions_whole_and_streamed(mesh: Running) -> None:
    client = sdk(mesh)
    whole = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=4)
    assert len(whole.choices[0].message.content.split()) == 4 and whole.usage.completion_tokens == 4
    stream = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=5,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert len("".join(c.choices[0].delta.content or "" for c in chunks if c.choices).split()) == 5
    assert chunks[-1].usage.completion_tokens == 5


def test_an_agent_turn_runs_a_tool(mesh: Running) -> None:
    answer = sdk(mesh).chat.completions.create(
        model="agentmesh-agent",
        messages=[{"role": "user", "content": "What is 6*7?"}],
        tool_choice={"type": "function", "function": {"name": "calculator"}},
        max_tokens=4,
    )
    calls = answer.model_extra["agentmesh"]["tool_calls"]
    assert [(c["phase"], c["name"]) for c in calls] == [("started", "calculator"), ("finished", "calculator")]
    assert answer.choices[0].message.content and answer.model_extra["agentmesh"]["session_id"]


def test_401_without_a_key_and_curl_smoke(mesh: Running) -> None:
    with pytest.raises(openai.AuthenticationError):
        sdk(mesh, key="not-a-real-key").models.list()
    denied = curl("-w", "%{http_code}", "-o", "/dev/null", f"{mesh.url}/models")
    assert denied.stdout == "401"
    models = json.loads(curl(f"{mesh.url}/models", "-H", f"Authorization: Bearer {mesh.key}").stdout)
    assert [m["id"] for m in models["data"]] == ["agentmesh-agent", MODEL]
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "stream": True}
    streamed = curl(
        f"{mesh.url}/chat/completions",
        "-H",
        f"Authorization: Bearer {mesh.key}",
        "-H",
        "Content-Type: application/json",
        "-d",
        json.dumps(body),
    )
    events = [e.removeprefix("data: ") for e in streamed.stdout.split("\n\n") if e]
    assert events[-1] == "[DONE]" and json.loads(events[-2])["choices"][0]["finish_reason"] == "length"


def test_429_with_retry_after_past_the_tenants_rate_limit(mesh: Running) -> None:
    client = sdk(mesh, key=mesh.flood_key)
    limited = None
    for _ in range(12):  # 8 of burst, refilled at 0.5/s: a few of these must be refused
        try:
            client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=1)
        except openai.RateLimitError as exc:
            limited = exc
            break
    assert limited is not None, "12 requests against a burst of 8 were never limited"
    assert limited.status_code == 429 and 1 <= int(limited.response.headers["retry-after"]) <= 2
    sdk(mesh).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=1)
