"""Every configured MCP server mounted into the tool registry, kept in step as servers list, fail and come back.

In: the servers of the MCP config and the executor's ``ToolRegistry``. Each
server gets an ``McpConnection``; each listing it makes replaces that server's
tools in the registry (``ToolRegistry.replace_source``: a list that did not
change wakes nobody), and each change of its state (up, down) wakes ListTools
watchers, since ``ToolOrigin.available`` changed. A server that is down keeps
its last tools listed: a call to one fails at once as UNAVAILABLE with the
reason, which the model can relay, and the planner's embeddings do not churn
each time a server restarts. A name in a server's namespace that the server
does not list while it is down is UNAVAILABLE too (``unknown_tool``), not
NOT_FOUND.

``start`` launches every connection; ``settled`` waits (bounded) for each
first attempt, so the executor's first ListTools already has the tools of the
servers that came up; ``close`` shuts them all down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

import mcp_types as types

from services.tools.mcp.config import McpServerConfig
from services.tools.mcp.connection import McpConnection, ServerState
from services.tools.mcp.definitions import definitions
from services.tools.metrics import ToolMetrics
from services.tools.registry import ToolRegistry

log = logging.getLogger(__name__)


class McpMount:
    """See module docstring."""

    def __init__(
        self, servers: Sequence[McpServerConfig], registry: ToolRegistry, metrics: ToolMetrics | None = None
    ) -> None:
        self._registry = registry
        self._metrics = metrics
        self.connections = {
            s.name: McpConnection(s, on_tools=self._listed, on_state=self._state_changed) for s in servers
        }

    def start(self) -> None:
        for connection in self.connections.values():
            if self._metrics is not None:
                self._metrics.mcp_server_up.labels(connection.name).set(0)
            connection.start()

    async def settled(self, timeout_s: float) -> None:
        """Wait until every server's first attempt has ended, at most ``timeout_s``."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await asyncio.gather(*(c.settled() for c in self.connections.values()))

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.connections.values()))

    def unknown_tool(self, name: str) -> str:
        """For the executor: why ``name``, which no tool has, cannot be called, if its server is down."""
        for connection in self.connections.values():
            if connection.config.owns(name) and connection.state is not ServerState.READY:
                return connection.unavailable()
        return ""

    def _listed(self, connection: McpConnection, tools: list[types.Tool]) -> None:
        mounted = definitions(connection, tools)
        for clash in self._registry.replace_source(connection.name, mounted):
            log.warning("MCP server %s: tool %s skipped: another tool has that name", connection.name, clash.name)
        if self._metrics is not None:
            self._metrics.mcp_server_tools.labels(connection.name).set(
                sum(1 for t in self._registry if t.server == connection.name)
            )

    def _state_changed(self, connection: McpConnection) -> None:
        if self._metrics is not None:
            self._metrics.mcp_server_up.labels(connection.name).set(1 if connection.state is ServerState.READY else 0)
            if connection.state is ServerState.READY and connection.restarts:
                self._metrics.mcp_restarts.labels(connection.name).inc()
        self._registry.touch()
