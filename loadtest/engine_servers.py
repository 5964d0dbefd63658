"""The servers the benchmark against vLLM starts, each alone, on the same engine settings.

Every one serves SmolLM2-135M-Instruct on vLLM's ``AsyncLLM``: float32,
``max_model_len`` 2048, prefix caching on, eager mode, ``max_num_seqs`` 32,
1 GiB CPU KV cache (the inference service's defaults, spelled out on vLLM's side).

- ``start_inference``: our inference service alone (``python -m services.inference``);
- ``start_mesh``: the whole mesh as ``agentmesh up`` (``make run``) starts it —
  inference, tools, router, gateway as processes on loopback — with the router's
  response cache off, the gateway's rate limits out of the way and its adaptive
  admission limit pinned open (vLLM's server has no admission control); Redis from
  ``AGENTMESH_BENCH_REDIS_URL`` (default database 13, as ``loadtest.bench_env``);
- ``start_vllm``: vLLM's own gRPC server (smg-grpc-servicer, what ``vllm serve --grpc``
  runs), its warm-up off.

Each runs in its own process group and logs to ``loadtest/results/<name>.log``
(git-ignored), so a server that fails to start can be read about afterwards.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from meshkit.up import BENCH_ENV, UpPorts, free_port, up_argv

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "loadtest" / "results"
#: The gateway's key for the benchmark's tenant (loopback only).
MESH_API_KEY = "h2h-bench-key"
REDIS_URL = os.environ.get("AGENTMESH_BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
ENGINE_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}


@dataclass
class Launched:
    """A started server: the address to call and the process (group leader) behind it."""

    name: str
    address: str
    proc: subprocess.Popen[bytes]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, grace_s: float = 60.0) -> None:
        """SIGTERM the leader (``agentmesh up`` forwards it in reverse start order); then end the whole group."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        with contextlib.suppress(ProcessLookupError):  # an engine core left behind by a leader that died
            os.killpg(self.proc.pid, signal.SIGKILL)


def _spawn(name: str, argv: list[str], env: dict[str, str], address: str) -> Launched:
    LOGS.mkdir(parents=True, exist_ok=True)
    with (LOGS / f"{name}.log").open("ab") as log:
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return Launched(name, address, proc)


def start_inference(model: str) -> Launched:
    port = free_port()
    argv = [sys.executable, "-m", "services.inference", "--port", str(port), "--metrics-port", "-1", "--model", model]
    argv += ["--max-num-seqs", "32", "--log-level", "warning"]
    return _spawn("inference", argv, ENGINE_ENV, f"127.0.0.1:{port}")


def start_mesh(model: str) -> Launched:
    ports = UpPorts.free()
    argv = up_argv(ports, sim_replicas=None, extra=["--redis-url", REDIS_URL])
    env = {
        **ENGINE_ENV,
        **BENCH_ENV,
        "AGENTMESH_GATEWAY_API_KEYS": f"bench:{MESH_API_KEY}",
        "AGENTMESH_INFERENCE_MODEL": model,
        "AGENTMESH_INFERENCE_MAX_NUM_SEQS": "32",
        # vLLM's server has no admission control: pin the gateway's adaptive limit open (its TTFT target out of
        # reach) so the comparison is of serving paths, not of a CPU engine's ~3 s TTFT p99 meeting the default
        # 3 s target and the limit shrinking below the benchmark's concurrency (BENCHMARKS.md).
        "AGENTMESH_GATEWAY_TTFT_TARGET_S": "600",
    }
    return _spawn("mesh", argv, env, f"127.0.0.1:{ports.gateway}")


def start_vllm(model: str) -> Launched:
    port = free_port()
    argv = [sys.executable, "-m", "vllm.entrypoints.launchers.grpc_server", "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--model", model, "--dtype", "float32", "--max-model-len", "2048", "--enforce-eager"]
    argv += ["--enable-prefix-caching", "--max-num-seqs", "32", "--disable-log-stats"]
    return _spawn("vllm", argv, {**ENGINE_ENV, "SMG_VLLM_SERVICER_WARMUP": "off"}, f"127.0.0.1:{port}")
