"""The generality catalog served by an MCP server over stdio, for the eval's ``served by an MCP server`` run.

Each tool of ``evals/generality/catalog.json`` is listed with its own name,
description and input schema (the JSON schema as the file has it, which is why
this is the SDK's low-level server: the high-level one derives schemas from
Python signatures), and a call answers ``recorded_output(name, arguments)`` as
structured content with the same JSON as text — what the in-process recorder
answers, so the tool executor's output for it is the same object. The server
only records, so its tools are annotated read-only, idempotent and closed-world;
``servers_config`` mounts it without a name prefix and with the in-process
catalog's policy (one attempt, never cached), so the two runs differ only in
where the catalog is served from.

Run by the tool executor (``python -m evals.catalog_mcp_server``, from the
repository root); like every stdio MCP server it writes nothing but JSON-RPC
to stdout.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from evals.catalog import CATALOG_FILE, load_catalog, recorded_output
from services.tools.mcp.config import McpServerConfig, load_mcp_config

#: The server's name in the config; with no prefix its tools keep the catalog's names.
SERVER_NAME = "catalog"
REPO_ROOT = Path(__file__).resolve().parent.parent
#: What the server does, stated as MCP hints: it records a call and answers from its arguments.
RECORDER_HINTS = types.ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


def servers_config(catalog_file: Path = CATALOG_FILE) -> dict[str, Any]:
    """The ``mcpServers`` config that mounts this server as the in-process catalog is registered.

    No prefix (the tools keep their names), one attempt and no result cache
    (``catalog_tools``'s policy), and room for a slow start on a loaded box.
    """
    server = {
        "command": sys.executable,
        "args": ["-m", "evals.catalog_mcp_server", str(catalog_file)],
        "cwd": str(REPO_ROOT),
        "prefix": "",
        "max_attempts": 1,
        "cache_ttl_s": 0,
        "timeout_s": 5,
        "startup_timeout_s": 30,
    }
    return {"mcpServers": {SERVER_NAME: server}}


def catalog_mcp_servers(catalog_file: Path = CATALOG_FILE) -> tuple[McpServerConfig, ...]:
    """``servers_config`` as the tool executor's ``--mcp-config`` reads it: written to a temporary file, loaded."""
    with tempfile.TemporaryDirectory(prefix="agentmesh-eval-mcp-") as folder:
        path = Path(folder) / "servers.json"
        path.write_text(json.dumps(servers_config(catalog_file), indent=2), encoding="utf-8")
        return load_mcp_config(path)


def catalog_server(catalog_file: Path = CATALOG_FILE) -> Server[Any]:
    """The low-level server listing the catalog of ``catalog_file`` and recording its calls."""
    catalog = load_catalog(catalog_file)
    tools = [
        types.Tool(
            name=name,
            description=str(tool["description"]),
            input_schema=dict(tool["parameters"]),
            annotations=RECORDER_HINTS,
        )
        for name, tool in catalog.items()
    ]

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in catalog:
            text = f"no tool called {params.name!r} in the catalog"
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
        output = recorded_output(params.name, dict(params.arguments or {}))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(output))], structured_content=output
        )

    return Server(SERVER_NAME, on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio(catalog_file: Path) -> None:
    server = catalog_server(catalog_file)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(serve_stdio, Path(sys.argv[1]) if len(sys.argv) > 1 else CATALOG_FILE)
