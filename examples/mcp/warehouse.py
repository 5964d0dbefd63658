"""A small MCP server of our own, over stdio: stock levels and reorders of a pretend warehouse.

Run by the tool executor from ``examples/mcp/servers.json`` (``agentmesh up
--mcp-config examples/mcp/servers.json``); its tools reach the agent as
``warehouse__stock_level``, ``warehouse__list_items`` and
``warehouse__reorder``. It shows what the executor reads from a server: the
read-only annotation (results cached, calls retried), progress notifications
(``reorder`` reports three steps, which stream to the client), ``isError``
(an unknown item), and structured content. Like every stdio MCP server it
writes nothing but JSON-RPC to stdout: the SDK's server diverts ``print`` to
stderr, where the executor's log shows it.
"""

from __future__ import annotations

import os

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

REGION = os.environ.get("WAREHOUSE_REGION", "eu-west")
STOCK = {"widget": 140, "gadget": 12, "sprocket": 0, "flange": 57}
server = MCPServer("warehouse", log_level="WARNING")
orders: list[dict[str, object]] = []


def _known(item: str) -> str:
    name = item.strip().lower().rstrip("s")
    if name not in STOCK:
        raise ToolError(f"no item called {item!r}; the warehouse stocks {', '.join(sorted(STOCK))}")
    return name


@server.tool(annotations=ToolAnnotations(read_only_hint=True, title="Stock level"))
def stock_level(item: str) -> dict[str, object]:
    """How many of an item (widget, gadget, sprocket, flange) the warehouse has in stock right now."""
    name = _known(item)
    return {"item": name, "in_stock": STOCK[name], "warehouse": REGION}


@server.tool(annotations=ToolAnnotations(read_only_hint=True, title="Items"))
def list_items() -> dict[str, object]:
    """Every item the warehouse stocks, with its stock level."""
    return {"warehouse": REGION, "items": dict(sorted(STOCK.items()))}


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, title="Reorder"))
async def reorder(item: str, quantity: int, ctx: Context) -> dict[str, object]:
    """Order more of an item from the supplier; reports progress while the order goes through."""
    name = _known(item)
    if quantity <= 0:
        raise ToolError("quantity must be a positive number")
    for step, what in enumerate(("checking the supplier", "reserving stock", "confirming the order"), start=1):
        await ctx.report_progress(step, 3, what)
        await anyio.sleep(0.2)
    order = {"order_id": f"PO-{len(orders) + 1:04d}", "item": name, "quantity": quantity, "warehouse": REGION}
    orders.append(order)
    return order


if __name__ == "__main__":
    server.run()
