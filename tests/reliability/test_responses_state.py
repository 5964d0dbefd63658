"""The Responses API's state and failures on the mesh as processes: stored responses outlive every mesh process
(Redis kept), and a router killed under a streamed response ends the stream with the API's own failure event.

The gateway's HTTP edge is on (``MeshShape.http_edge``); two routers, so a retry lands on the one still up.
Answers come from simulator replicas: what is checked is state and failure handling, not the text.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator
from typing import Any

import httpx

from tests.support.process_mesh import API_KEY, MeshShape, ProcessMesh
from tests.support.processes import busy_one

SHAPE = MeshShape(replicas=2, routers=2, http_edge=True)
HEADERS = {"Authorization": f"Bearer {API_KEY}"}
CONVERSE = {"grpc_method": "Converse"}


def edge(mesh: ProcessMesh) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=f"http://127.0.0.1:{mesh.http_port}/v1", headers=HEADERS, timeout=60)


def body(text: str, **more: Any) -> dict[str, Any]:
    """A plain-chat response on the agent model (no tools: the simulator's text plans nothing)."""
    return {"model": "agentmesh-agent", "input": text, "tool_choice": "none", "max_output_tokens": 40, **more}


async def events(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The stream's server-sent events, decoded, in order."""
    async for line in response.aiter_lines():
        if line.startswith("data: "):
            yield json.loads(line.removeprefix("data: "))


async def test_a_stored_response_outlives_every_mesh_process(mesh: ProcessMesh) -> None:
    async with edge(mesh) as http:
        created = await http.post("/responses", json=body("Remember the word heliotrope."))
        assert created.status_code == 200, created.text
        first = created.json()
        # The simulator answers to the length asked: incomplete (max_output_tokens), with its output stored.
        assert first["status"] in ("completed", "incomplete") and first["output"], first
    for service in reversed(mesh.services):  # every process but Redis: kill -9, then start it again
        service.kill()
        await service.wait_exit()
    await asyncio.gather(*(s.start() for s in [*mesh.replicas, mesh.tools]))
    await asyncio.gather(*(r.start() for r in mesh.routers))
    await mesh.gateway.start()
    async with edge(mesh) as http:
        again = await http.get(f"/responses/{first['id']}")
        assert again.status_code == 200, again.text
        assert again.json()["output"] == first["output"]
        items = await http.get(f"/responses/{first['id']}/input_items")
        assert (
            items.status_code == 200
            and items.json()["data"][0]["content"][0]["text"] == "Remember the word heliotrope."
        )
        follow = await http.post("/responses", json=body("Which word?", previous_response_id=first["id"]))
        assert follow.status_code == 200, follow.text
        assert follow.json()["previous_response_id"] == first["id"]


async def test_a_router_killed_under_a_streamed_response_ends_it_failed_and_a_retry_works(mesh: ProcessMesh) -> None:
    request = body("Tell me a long story.", stream=True, max_output_tokens=300)
    seen: list[str] = []
    async with edge(mesh) as http, http.stream("POST", "/responses", json=request) as response:
        assert response.status_code == 200
        stream = events(response)
        async for event in stream:
            seen.append(event["type"])
            if event["type"] == "response.output_text.delta":
                break  # the answer is under way
        victim = await busy_one(mesh.routers, "agentmesh_rpc_server_in_flight", **CONVERSE)
        victim.kill()
        async with asyncio.timeout(30):  # a hung stream fails here
            last = None
            async for event in stream:
                seen.append(event["type"])
                last = event
    assert await victim.wait_exit() == -signal.SIGKILL
    assert last is not None, seen
    # The answer was cut: the API's own failure event ends the stream (the gateway does not move a turn that has
    # begun answering: the client retries it).
    assert last["type"] in ("response.failed", "response.incomplete"), seen[-5:]
    assert seen.index("response.created") == 0 and seen.count(last["type"]) == 1
    if last["type"] == "response.failed":
        assert last["response"]["status"] == "failed" and last["response"]["error"]["message"], last
    async with edge(mesh) as http:  # the same request again goes through the router still up
        request["stream"] = False
        retried = await http.post("/responses", json=request)
        assert retried.status_code == 200, retried.text
        assert retried.json()["status"] in ("completed", "incomplete") and retried.json()["output"]
