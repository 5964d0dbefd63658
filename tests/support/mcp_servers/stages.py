"""A stdio test MCP server whose one tool takes no arguments and reports progress: ``rebuild`` (three stages).

For turns planned on the simulator engine, which fills arguments with the smallest instance of a schema: a
tool without arguments reports its progress whatever the fill writes.
"""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("stages", log_level="WARNING")
STAGES = ("fetching sources", "compiling", "linking")


@server.tool()
async def rebuild(ctx: Context) -> str:
    """Rebuild the project, reporting each of its three stages."""
    for step, what in enumerate(STAGES, start=1):
        await ctx.report_progress(step, len(STAGES), what)
        await anyio.sleep(0.05)
    return "rebuilt in 3 stages"


if __name__ == "__main__":
    server.run()
