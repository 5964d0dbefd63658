"""A test MCP server on the SDK's low-level API: its tools over three pages, one with an invalid input schema."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

OBJECT: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}}
PAGES: list[list[types.Tool]] = [
    [types.Tool(name="one", description="Page one.", input_schema=OBJECT)],
    [
        types.Tool(name="two", description="Page two.", input_schema=OBJECT),
        types.Tool(name="broken", description="Bad schema.", input_schema={"type": "object", "minProperties": -1}),
    ],
    [types.Tool(name="three.dotted", description="Page three, a dotted name.", input_schema=OBJECT)],
]


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    page = int(params.cursor) if params is not None and params.cursor else 0
    more = str(page + 1) if page + 1 < len(PAGES) else None
    return types.ListToolsResult(tools=PAGES[page], next_cursor=more)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    n = (params.arguments or {}).get("n", 0)
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"{params.name} got {n}")])


async def main() -> None:
    server: Server[Any] = Server("paged", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
