"""MCP tools end to end: a real MCP server (stdio) mounted in a real tool executor, a router and a gateway on the
simulator engine.

The router learns each tenant's tools from the executor's WatchTools: ``wb`` (the workbench, every tenant),
``private`` (the workbench again, tenant ``acme`` only) and ``build`` (``stages.py``: a tool without arguments
that reports progress). Turns name their tool (``tool_choice`` named), so the test does not depend on a
selector's scores, and the simulator fills arguments with the smallest instance of the schema (0 for an
integer): the progress test calls the tool without arguments, the others check outputs accordingly; the
candidates a tenant's turn is planned against are the router's ListTools for that tenant (the same list).
A tool the tenant may not use is refused before the turn starts: INVALID_ARGUMENT naming
``start_turn.tool_choice.tool_name`` (the executor would also refuse its call in band, PERMISSION_DENIED).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import grpc
import httpx
import pytest
import redis.asyncio as aioredis
from google.rpc import status_pb2

from agentmesh.agent.v1 import agent_pb2, agent_pb2_grpc
from agentmesh.common.v1 import common_pb2
from gateway.build import load_keys, start_http_edge
from gateway.config import GatewayConfig
from meshkit.mesh import Mesh, start_mesh
from meshkit.turns import converse
from services.runtime.tenancy import TENANT_HEADER
from tests.support.mcp_servers.harness import STAGES, WORKBENCH, McpExecutor, mcp_executor, stdio

ACME = (("authorization", "Bearer acme-secret-key"),)
OTHER = (("authorization", "Bearer other-secret-key"),)


def named(tool: str, message: str) -> agent_pb2.StartTurn:
    return agent_pb2.StartTurn(
        message=message, tool_choice=agent_pb2.ToolChoice(mode=agent_pb2.TOOL_CHOICE_MODE_NAMED, tool_name=tool)
    )


class McpMesh:
    def __init__(self, mesh: Mesh, ex: McpExecutor, router: agent_pb2_grpc.AgentServiceAsyncStub) -> None:
        self.mesh = mesh
        self.ex = ex
        self.router = router
        self.gateway: agent_pb2_grpc.AgentServiceAsyncStub | None = None
        self.gateway_port = 0

    async def tool_names(self, tenant: str) -> set[str]:
        reply = await self.router.ListTools(agent_pb2.ListToolsRequest(), metadata=((TENANT_HEADER, tenant),))
        return {t.name for t in reply.tools}


async def listed(m: McpMesh, tenant: str, name: str, within_s: float = 20.0) -> None:
    """Wait until the router lists ``name`` for ``tenant`` (a WatchTools snapshot reached it)."""
    deadline = time.monotonic() + within_s
    while name not in await m.tool_names(tenant):
        if time.monotonic() > deadline:
            raise AssertionError(f"the router did not list {name} for {tenant} within {within_s} s")
        await asyncio.sleep(0.05)


@pytest.fixture
async def mcp_mesh(redis_client: aioredis.Redis, tmp_path: Path) -> AsyncIterator[McpMesh]:
    (tmp_path / "private").mkdir()
    servers = {
        "wb": stdio(WORKBENCH, tmp_path),
        "private": stdio(WORKBENCH, tmp_path / "private", tenants=["acme"]),
        "build": stdio(STAGES, tmp_path),
    }
    async with mcp_executor(servers) as ex:
        mesh = await start_mesh(redis_client, replicas=1)
        try:
            # Polled lists would take a minute: only WatchTools can bring a change within the tests' waits.
            router = await mesh.add_router(tools=ex.address, tool_selection="llm", tools_poll_s=60.0)
            m = McpMesh(mesh, ex, router)
            m.gateway, _, server = await mesh.add_gateway()
            m.gateway_port = server.port
            yield m
        finally:
            await mesh.close()


async def test_an_mcp_tool_is_called_through_a_turn_and_its_progress_reaches_the_client(mcp_mesh: McpMesh) -> None:
    assert mcp_mesh.gateway is not None
    result = await converse(mcp_mesh.gateway, named("build__rebuild", "Rebuild the project."), metadata=ACME)
    kinds = [e.WhichOneof("event") for e in result.events]
    started = [e.tool_call_started for e in result.events if e.HasField("tool_call_started")]
    assert [s.tool_name for s in started] == ["build__rebuild"]
    progress = [e.tool_call_progress for e in result.events if e.HasField("tool_call_progress")]
    assert progress, kinds
    assert all(p.call_id == started[0].call_id and p.tool_name == "build__rebuild" for p in progress)
    assert [p.progress for p in progress] == sorted({p.progress for p in progress})  # increasing, newest kept
    assert (progress[-1].progress, progress[-1].total, progress[-1].message) == (3, 3, "linking")
    # Progress comes between the call's start and its finish.
    assert kinds.index("tool_call_started") < kinds.index("tool_call_progress")
    assert max(i for i, k in enumerate(kinds) if k == "tool_call_progress") < kinds.index("tool_call_finished")
    finished = next(e.tool_call_finished for e in result.events if e.HasField("tool_call_finished"))
    assert finished.status == common_pb2.TOOL_CALL_STATUS_OK
    assert "rebuilt in 3 stages" in finished.output_json
    assert result.events[-1].turn_completed.finish_reason == common_pb2.FINISH_REASON_STOP


async def test_a_tenant_off_the_allow_list_gets_no_candidate_and_no_call_while_an_allowed_one_does(
    mcp_mesh: McpMesh,
) -> None:
    assert "private__add" in await mcp_mesh.tool_names("acme")
    other = await mcp_mesh.tool_names("other")
    assert "wb__add" in other and not any(name.startswith("private__") for name in other)
    assert mcp_mesh.gateway is not None
    refused = await converse(mcp_mesh.gateway, named("private__add", "Add two numbers."), metadata=OTHER)
    done = refused.events[-1].turn_completed
    assert done.finish_reason == common_pb2.FINISH_REASON_ERROR
    status = status_pb2.Status.FromString(done.status)
    assert status.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert b"start_turn.tool_choice.tool_name" in done.status
    assert not any(e.HasField("tool_call_started") for e in refused.events)
    allowed = await converse(mcp_mesh.gateway, named("private__add", "Add two numbers."), metadata=ACME)
    finished = next(e.tool_call_finished for e in allowed.events if e.HasField("tool_call_finished"))
    # The values are the planner's ("two" is offered to the integer properties): the tenant's call runs.
    assert finished.status == common_pb2.TOOL_CALL_STATUS_OK and json.loads(finished.output_json).keys() == {"result"}


async def test_list_changed_makes_a_new_tool_plannable_without_restarting_the_router(mcp_mesh: McpMesh) -> None:
    assert "wb__extra" not in await mcp_mesh.tool_names("acme")
    grown = await converse(mcp_mesh.router, named("wb__grow", "Grow the workbench."))
    assert next(e.tool_call_finished for e in grown.events if e.HasField("tool_call_finished")).status == (
        common_pb2.TOOL_CALL_STATUS_OK
    )
    await listed(mcp_mesh, "acme", "wb__extra")
    doubled = await converse(mcp_mesh.router, named("wb__extra", "Double a number."))
    finished = next(e.tool_call_finished for e in doubled.events if e.HasField("tool_call_finished"))
    assert finished.status == common_pb2.TOOL_CALL_STATUS_OK and json.loads(finished.output_json) == {
        "result": 0
    }  # x = 0


async def test_a_turn_limited_to_one_servers_tools_is_planned_over_those_alone(mcp_mesh: McpMesh) -> None:
    # What the Responses API's {"type": "mcp", "server_label": "build"} sends: that server's tools, not the mesh's.
    assert mcp_mesh.gateway is not None
    required = agent_pb2.ToolChoice(mode=agent_pb2.TOOL_CHOICE_MODE_REQUIRED)
    start = agent_pb2.StartTurn(message="Rebuild it.", tool_choice=required, allowed_mesh_tools=["build__rebuild"])
    result = await converse(mcp_mesh.gateway, start, metadata=ACME)
    started = [e.tool_call_started.tool_name for e in result.events if e.HasField("tool_call_started")]
    assert started == ["build__rebuild"], [e.WhichOneof("event") for e in result.events]
    # A tool this tenant may not use, or one named twice, is refused before the turn starts, naming the field.
    for names, field in ((["private__add"], b"allowed_mesh_tools[0]"), (["wb__add", "wb__add"], b"[1]")):
        start = agent_pb2.StartTurn(message="Add.", allowed_mesh_tools=names)
        done = (await converse(mcp_mesh.gateway, start, metadata=OTHER)).events[-1].turn_completed
        status = status_pb2.Status.FromString(done.status)
        assert status.code == grpc.StatusCode.INVALID_ARGUMENT.value[0] and field in done.status, status


async def test_the_responses_api_offers_an_mcp_tool_by_its_server_label(mcp_mesh: McpMesh) -> None:
    config = replace(GatewayConfig(), http_port=0, api_keys="acme:acme-secret-key", drain_grace_s=0)
    edge = await start_http_edge(config, mcp_mesh.gateway_port, load_keys(config), None)
    assert edge is not None
    url = f"http://127.0.0.1:{edge.port}/v1"
    body = {"model": "agentmesh-agent", "input": "Rebuild it.", "tool_choice": "required", "max_output_tokens": 8}
    try:
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": "Bearer acme-secret-key"}) as http:
            build = {"type": "mcp", "server_label": "build", "require_approval": "never"}
            reply = await http.post("/responses", json={**body, "tools": [build]})
            assert reply.status_code == 200, reply.text
            calls = [item for item in reply.json()["output"] if item["type"] == "mcp_call"]
            assert [(c["server_label"], c["name"]) for c in calls] == [("build", "rebuild")], reply.json()["output"]
            for tool, param in (
                ({"type": "mcp", "server_label": "nowhere"}, "tools[0].server_label"),
                ({"type": "mcp", "server_label": "wb", "allowed_tools": ["no_such_tool"]}, "tools[0].allowed_tools"),
                ({"type": "mcp", "server_label": "wb", "allowed_tools": "add"}, "tools[0].allowed_tools"),
                ({"type": "mcp", "server_label": "wb", "require_approval": "always"}, "tools[0].require_approval"),
            ):
                refused = await http.post("/responses", json={**body, "tools": [tool]})
                assert refused.status_code == 400 and refused.json()["error"]["param"] == param, refused.text
    finally:
        await edge.close()
