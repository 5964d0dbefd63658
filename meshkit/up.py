"""``agentmesh up`` as a child process, for the tests and benchmarks that need the mesh as real processes.

One place for what they all repeated: free ports, the command line (simulator or
vLLM, metrics, the OpenAI HTTP port), the environment that moves the gateway's
limits out of a benchmark's way, and waiting for the "mesh is up" line. Each
caller still chooses how to run the process (its working tree, its output, its
environment), since a benchmark of two checkouts runs each from its own tree.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

#: What ``agentmesh up`` prints once every service reports SERVING.
UP_LINE = "the mesh is up"

#: A benchmark measures the mesh, not its rate limits: budgets no run reaches, and no response cache.
BENCH_ENV = {
    "AGENTMESH_GATEWAY_RATE_RPS": "100000",
    "AGENTMESH_GATEWAY_RATE_BURST": "100000",
    "AGENTMESH_GATEWAY_RATE_WINDOW_MAX": "10000000",
    "AGENTMESH_GATEWAY_RATE_TOKENS_PER_MIN": "1000000000",
    "AGENTMESH_GATEWAY_RATE_TOKEN_BURST": "1000000000",
    "AGENTMESH_ROUTER_RESPONSE_CACHE_TTL_S": "0",
    "AGENTMESH_LOG_LEVEL": "warning",
}


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A loopback port nothing listens on right now (the OS picks it), and never one this process was given before:
    the OS may hand a just-closed port out again, and two services given one port collide (CI saw the gateway and
    the inference service both on one)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


@dataclass(frozen=True)
class UpPorts:
    """The mesh's ports. ``http``: the OpenAI HTTP edge's, -1 off (its default, 8080, would collide between
    meshes), None to pass no flag (a checkout older than the edge)."""

    gateway: int
    router: int
    tools: int
    inference: int
    http: int | None = -1

    @classmethod
    def free(cls, *, http: bool = False) -> UpPorts:
        return cls(free_port(), free_port(), free_port(), free_port(), free_port() if http else -1)


def up_argv(
    ports: UpPorts,
    *,
    sim_replicas: int | None = 1,
    metrics_base: int | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """The command line: simulator replicas (``sim_replicas=None``: the vLLM engine), metrics off unless given."""
    argv = [sys.executable, "-m", "services.cli", "up"]
    if sim_replicas is not None:
        argv += ["--no-vllm", "--sim-replicas", str(sim_replicas)]
    argv += ["--no-metrics"] if metrics_base is None else ["--metrics-port-base", str(metrics_base)]
    for name in ("gateway", "router", "tools", "inference"):
        argv += [f"--{name}-port", str(getattr(ports, name))]
    if ports.http is not None:
        argv += ["--gateway-http-port", str(ports.http)]
    return [*argv, *extra]


def wait_until_up(proc: subprocess.Popen[str], within_s: float) -> list[str]:
    """``proc``'s output lines up to the "mesh is up" line; raises with the tail if it exits or takes too long."""
    assert proc.stdout is not None, "start agentmesh up with stdout=PIPE and text=True"
    lines: list[str] = []
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("agentmesh up exited early:\n" + "".join(lines[-40:]))
        lines.append(line)
        if UP_LINE in line:
            return lines
    proc.kill()
    raise RuntimeError(f"agentmesh up did not come up within {within_s:g} s:\n" + "".join(lines[-40:]))
