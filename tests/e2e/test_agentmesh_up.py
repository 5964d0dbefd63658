"""`agentmesh up` as `make run` starts it (simulator replicas, to keep it quick): a turn, then a clean stop."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import grpc

from agentmesh.agent.v1 import agent_pb2, agent_pb2_grpc
from meshkit.up import UpPorts, up_argv, wait_until_up

ROOT = Path(__file__).resolve().parents[2]


def test_up_runs_the_mesh_and_stops_it_cleanly() -> None:
    ports = UpPorts.free()
    router = ports.router
    argv = up_argv(ports, sim_replicas=2)
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = wait_until_up(proc, within_s=120)
        with grpc.insecure_channel(f"127.0.0.1:{router}") as channel:
            stub = agent_pb2_grpc.AgentServiceStub(channel)
            start = agent_pb2.StartTurn(
                message="What is 6*7?",
                tool_choice=agent_pb2.ToolChoice(mode=agent_pb2.TOOL_CHOICE_MODE_NAMED, tool_name="calculator"),
            )
            requests = iter([agent_pb2.ConverseRequest(start_turn=start)])
            # Straight to the router, as an operator's tool would: the router serves only a named tenant.
            events = list(stub.Converse(requests, timeout=60, metadata=(("x-agentmesh-tenant", "e2e"),)))
        kinds = [e.WhichOneof("event") for e in events]
        assert kinds[0] == "turn_accepted" and kinds[-1] == "turn_completed" and "tool_call_finished" in kinds
        started = next(e.tool_call_started for e in events if e.HasField("tool_call_started"))
        assert started.tool_name == "calculator" and json.loads(started.arguments_json)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        lines.append(out)
        assert proc.returncode == 0, "".join(lines)
        text = "".join(lines)
        for name in ("sim-0", "sim-1", "tools", "router", "gateway"):
            assert f"{name} is serving" in text
        assert text.count("draining") == 5
    finally:
        proc.kill()
