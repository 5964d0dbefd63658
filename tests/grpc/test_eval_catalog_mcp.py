"""The generality catalog's MCP server (``evals/catalog_mcp_server.py``), started for real over stdio by the tool
executor's MCP mount with the eval's own config: it lists exactly the catalog, as the in-process catalog is
registered, and a call answers what the in-process recorder answers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from agentmesh.common.v1 import common_pb2
from evals.catalog import catalog_tools, load_catalog, recorded_output
from evals.catalog_mcp_server import SERVER_NAME, servers_config
from services.tools.builtin import default_tools
from tests.support.mcp_servers.harness import ExecuteClient, McpExecutor, mcp_executor, output


@pytest.fixture(scope="module")
async def ex() -> AsyncIterator[McpExecutor]:
    async with mcp_executor(servers_config()["mcpServers"]) as executor:
        yield executor


async def test_it_lists_exactly_the_catalog_with_the_in_process_names_descriptions_schemas_and_policy(
    ex: McpExecutor,
) -> None:
    catalog = load_catalog()
    reply = await ex.list_tools()
    builtins = {t.name for t in default_tools()}
    served = [(t, o) for t, o in zip(reply.tools, reply.origins, strict=True) if t.name not in builtins]
    assert [t.name for t, _ in served] == list(catalog)  # every tool, none else, in the file's order
    assert {o.mcp_server for _, o in served} == {SERVER_NAME}
    in_process = {t.name: t for t in catalog_tools(catalog)}
    for spec, origin in served:
        assert origin.mcp_tool_name == spec.name and origin.read_only
        assert spec.description == catalog[spec.name]["description"]
        assert json.loads(spec.parameters_json_schema) == catalog[spec.name]["parameters"], spec.name
        assert spec.max_attempts == in_process[spec.name].attempts == 1
        assert spec.cache_ttl.ToTimedelta().total_seconds() == in_process[spec.name].cache_ttl_s == 0


async def test_a_call_answers_the_recorded_output(ex: McpExecutor) -> None:
    args = {"to": "alice@example.com", "subject": "Lunch on Friday?", "body": "Are you free at noon?"}
    client = ExecuteClient(ex.channel)
    try:
        result = await client.run("c1", "send_email", args)
        unknown_argument = await client.run("c2", "weather_current", {"city": "Lisbon", "colour": "blue"})
    finally:
        await client.close()
    assert result.status == common_pb2.TOOL_CALL_STATUS_OK, result.error_message
    assert output(result) == recorded_output("send_email", args) and result.attempts == 1
    # The executor checks arguments against the served schema before the server is asked, as in-process.
    assert unknown_argument.status == common_pb2.TOOL_CALL_STATUS_INVALID_ARGUMENT
