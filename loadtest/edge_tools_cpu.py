"""The OpenAI edge's CPU per request with client tools offered: what 20 tools add to a chat completion's request.

The edge's work that grows with ``tools`` is on the request side: decode the body, validate every tool (its
schema against the JSON Schema meta-schema — remembered per schema text, so a framework that sends the same
tools every request pays once), read the messages, and build the StartTurn the gateway's Converse takes. This
runs that path in process, on bodies of 0 and 20 tools (the first 20 of the generality catalog, as an agent
framework would declare them), interleaved round by round, and prints CPU milliseconds per request: cold (a
schema cache that has not seen the tools) and warm. The network, the router and the model are the same with
or without tools and are not in it.

    python -m loadtest.edge_tools_cpu [--requests 2000] [--rounds 5] [--tools 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from typing import Any

from agentmesh.agent.v1 import agent_pb2
from evals.catalog import load_catalog
from gateway.openai_body import decode_body
from gateway.openai_request import parse_chat_request
from gateway.openai_tools import SchemaChecks


def body_with(tools: int) -> bytes:
    """A chat completion request offering the catalog's first ``tools`` tools, with a short history."""
    catalog = list(load_catalog().items())[:tools]
    body: dict[str, Any] = {
        "model": "SmolLM2-135M-Instruct",
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Hi, I need some help planning my week."},
            {"role": "assistant", "content": "Sure, what do you need?"},
            {"role": "user", "content": "What is the weather in Berlin tomorrow, and do I have meetings then?"},
        ],
        "stream": True,
    }
    if catalog:
        body["tools"] = [
            {
                "type": "function",
                "function": {"name": n, "description": t["description"], "parameters": t["parameters"]},
            }
            for n, t in catalog
        ]
    return json.dumps(body).encode()


def one_request(raw: bytes, checks: SchemaChecks) -> bytes:
    """The edge's request path up to the bytes of the StartTurn it sends."""
    chat = parse_chat_request(decode_body(raw), {})
    checks.check(chat.client_tools)
    start = agent_pb2.StartTurn(message=chat.message, system_prompt=chat.system_prompt, client_tools=chat.specs())
    start.prior_tool_calls.extend(chat.prior_tool_calls())
    return start.SerializeToString()


def cpu_ms_per_request(raw: bytes, requests: int, checks: SchemaChecks) -> float:
    began = time.process_time()
    for _ in range(requests):
        one_request(raw, checks)
    return 1000 * (time.process_time() - began) / requests


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m loadtest.edge_tools_cpu", description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tools", type=int, default=20)
    ns = parser.parse_args(argv)
    bodies = {0: body_with(0), ns.tools: body_with(ns.tools)}
    cold = []
    for _ in range(ns.rounds):
        began = time.process_time()
        one_request(bodies[ns.tools], SchemaChecks())
        cold.append(1000 * (time.process_time() - began))
    warm: dict[int, list[float]] = {n: [] for n in bodies}
    checks = SchemaChecks()
    for r in range(ns.rounds):
        for n in sorted(bodies) if r % 2 == 0 else sorted(bodies, reverse=True):
            warm[n].append(cpu_ms_per_request(bodies[n], ns.requests, checks))
    base, with_tools = statistics.median(warm[0]), statistics.median(warm[ns.tools])
    print(f"| tools offered | request body | CPU ms per request (median of {ns.rounds} rounds of {ns.requests}) |")
    print("|---|---|---|")
    print(f"| 0 | {len(bodies[0])} B | {base:.3f} |")
    print(f"| {ns.tools} | {len(bodies[ns.tools])} B | {with_tools:.3f} (warm schema cache) |")
    print(f"| {ns.tools}, first request | | {statistics.median(cold):.2f} (cold: every schema checked) |")
    print(f"\n{ns.tools} tools add {with_tools - base:.3f} CPU ms per request ({with_tools / base:.1f}x).")


if __name__ == "__main__":
    main()
