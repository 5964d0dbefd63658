"""The gRPC face of the tool executor: thin, it hands streams to ExecuteSession."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc.aio
from opentelemetry import trace

from agentmesh.tools.v1 import tools_pb2, tools_pb2_grpc
from services.runtime.server import Service
from services.tools.convert import spec_to_proto
from services.tools.executor import ToolExecutor
from services.tools.session import ExecuteSession

SERVICE_NAME = tools_pb2.DESCRIPTOR.services_by_name["ToolExecutorService"].full_name


class ToolExecutorServicer(tools_pb2_grpc.ToolExecutorServiceServicer):
    def __init__(self, executor: ToolExecutor, tracer: trace.Tracer | None = None) -> None:
        self._executor = executor
        self._tracer = tracer

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
        return tools_pb2.ListToolsResponse(tools=[spec_to_proto(t) for t in self._executor.registry])
