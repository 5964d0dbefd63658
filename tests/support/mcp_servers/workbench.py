"""A test MCP server (see the package docstring): ``workbench.py`` (stdio) or ``workbench.py --http PORT``.

Marks in ``$MCP_TEST_MARKS``: ``pid-<n>`` per process start (n counts starts),
``started-<tag>`` and ``cancelled-<tag>`` around ``wait``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

MARKS = Path(os.environ.get("MCP_TEST_MARKS", "."))
READ_ONLY = ToolAnnotations(read_only_hint=True)
server = MCPServer("workbench", log_level="WARNING")
calls = {"count": 0}


def mark(name: str, text: str = "") -> None:
    (MARKS / name).write_text(text)


@server.tool(annotations=READ_ONLY)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool(annotations=READ_ONLY)
def counted() -> int:
    """How many times this tool ran in this process."""
    calls["count"] += 1
    return calls["count"]


@server.tool()
def note(text: str) -> str:
    """Write a note (a side effect: never cached, never retried)."""
    calls["count"] += 1
    return f"noted: {text}"


@server.tool()
def refuse(why: str) -> str:
    """Always fails with the reason given (an isError result)."""
    raise ToolError(f"refused: {why}")


@server.tool()
async def progress(steps: int, ctx: Context) -> str:
    """Report progress ``steps`` times, then finish."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
        await anyio.sleep(0.02)
    return f"{steps} steps done"


@server.tool()
async def wait(tag: str) -> str:
    """Wait until cancelled; marks its start and its cancellation."""
    mark(f"started-{tag}")
    try:
        await anyio.sleep(3600)
    except anyio.get_cancelled_exc_class():
        mark(f"cancelled-{tag}")
        raise
    return "never"


@server.tool()
async def hang() -> str:
    """Never answers, and ignores nothing (a hung backend)."""
    await anyio.sleep(3600)
    return "never"


@server.tool()
async def grow(ctx: Context) -> str:
    """Mount one more tool, ``extra``, and tell the client its list changed."""

    def extra(x: int) -> int:
        """The tool grow added."""
        return x * 2

    server.add_tool(extra, name="extra")
    await ctx.session.send_tool_list_changed()
    return "grown"


@server.tool()
def big(megabytes: int) -> str:
    """A text result of ``megabytes`` MB."""
    return "x" * (megabytes * 1024 * 1024)


def main() -> None:
    starts = len(list(MARKS.glob("pid-*"))) + 1
    mark(f"pid-{starts}", str(os.getpid()))
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()


if __name__ == "__main__":
    main()
