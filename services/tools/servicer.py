"""The gRPC face of the tool executor: thin, it hands streams to ExecuteSession and lists the registry.

ListTools answers with the tools the caller's tenant may see; WatchTools sends
that list at once and again whenever it changes (``ToolRegistry.wait_changed``),
skipping changes that leave this tenant's list as it was, and ends when the
executor starts draining (``announce_draining``), so an open watch never holds
a shutdown for its whole grace; the watcher reconnects, to another executor.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc.aio
from opentelemetry import trace

from agentmesh.tools.v1 import tools_pb2, tools_pb2_grpc
from services.runtime.server import Service
from services.tools.convert import tenant_from_metadata, tools_to_proto
from services.tools.executor import ToolExecutor
from services.tools.session import ExecuteSession

SERVICE_NAME = tools_pb2.DESCRIPTOR.services_by_name["ToolExecutorService"].full_name


class ToolExecutorServicer(tools_pb2_grpc.ToolExecutorServiceServicer):
    def __init__(self, executor: ToolExecutor, tracer: trace.Tracer | None = None) -> None:
        self._executor = executor
        self._tracer = tracer
        self._draining = asyncio.Event()

    async def announce_draining(self) -> None:
        """End every WatchTools stream (Execute streams drain as calls finish)."""
        self._draining.set()

    def service(self) -> Service:
        return Service(
            SERVICE_NAME,
            lambda server: tools_pb2_grpc.add_ToolExecutorServiceServicer_to_server(self, server),
        )

    # A coroutine writing with context.write, where the generated stub assumes a generator.
    async def Execute(  # type: ignore[override]
        self,
        request_iterator: AsyncIterator[tools_pb2.ExecuteRequest],
        context: grpc.aio.ServicerContext[tools_pb2.ExecuteRequest, tools_pb2.ExecuteResponse],
    ) -> None:
        await ExecuteSession(self._executor, context.write, self._tracer).run(request_iterator)

    async def ListTools(
        self,
        request: tools_pb2.ListToolsRequest,
        context: grpc.aio.ServicerContext[tools_pb2.ListToolsRequest, tools_pb2.ListToolsResponse],
    ) -> tools_pb2.ListToolsResponse:
        tenant = tenant_from_metadata(context.invocation_metadata() or ())
        return tools_to_proto(self._executor.registry.visible_to(tenant))

    async def WatchTools(
        self,
        request: tools_pb2.WatchToolsRequest,
        context: grpc.aio.ServicerContext[tools_pb2.WatchToolsRequest, tools_pb2.WatchToolsResponse],
    ) -> AsyncIterator[tools_pb2.WatchToolsResponse]:
        tenant = tenant_from_metadata(context.invocation_metadata() or ())
        registry = self._executor.registry
        sent = ""
        while not self._draining.is_set():
            revision = registry.revision
            tools = tools_to_proto(registry.visible_to(tenant))
            if tools.revision != sent:
                sent = tools.revision
                yield tools_pb2.WatchToolsResponse(tools=tools)
            changed = asyncio.ensure_future(registry.wait_changed(revision))
            draining = asyncio.ensure_future(self._draining.wait())
            try:
                await asyncio.wait({changed, draining}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                changed.cancel()
                draining.cancel()
