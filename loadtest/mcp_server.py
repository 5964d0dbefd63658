"""The MCP server the MCP overhead benchmark calls (``loadtest/mcp_overhead.py``): stdio, or ``--http PORT``.

``echo(n)`` returns at once (the call's cost is the protocol's and the
executor's alone); ``nap(ms)`` sleeps (concurrency: 50 naps at once take one
nap's time only if they run together).
"""

from __future__ import annotations

import sys

import anyio
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("bench", log_level="WARNING")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(n: int) -> int:
    """Return n."""
    return n


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def nap(ms: int) -> int:
    """Sleep ms milliseconds, then return them."""
    await anyio.sleep(ms / 1000)
    return ms


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
