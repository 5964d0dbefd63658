"""The gRPC face of the inference service: thin, it hands streams to GenerateSession."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import grpc.aio
from opentelemetry import trace

from agentmesh.inference.v1 import inference_pb2, inference_pb2_grpc
from services.inference.convert import load_to_proto, model_info_to_proto
from services.inference.engine import Engine
from services.inference.metrics import InferenceMetrics
from services.inference.session import GenerateSession, SessionSettings
from services.runtime.server import Service

SERVICE_NAME = inference_pb2.DESCRIPTOR.services_by_name["InferenceService"].full_name


class InferenceServicer(inference_pb2_grpc.InferenceServiceServicer):
    def __init__(
        self,
        engine: Engine,
        settings: SessionSettings,
        metrics: InferenceMetrics | None = None,
        is_draining: Callable[[], bool] = lambda: False,
        tracer: trace.Tracer | None = None,
    ) -> None:
        self._tracer = tracer
        self._engine = engine
        self._settings = settings
        self._metrics = metrics
        self._is_draining = is_draining
        self._sessions: set[GenerateSession] = set()

    def service(self) -> Service:
        return Service(
            SERVICE_NAME,
            lambda server: inference_pb2_grpc.add_InferenceServiceServicer_to_server(self, server),
        )

    def announce_draining(self) -> None:
        """Push a load report with ``draining=True`` on every open stream."""
        for session in self._sessions:
            session.request_load_report()

    # A coroutine that writes with context.write (the writer task owns the stream's
    # output side), where the generated stub assumes a generator.
    async def Generate(  # type: ignore[override]
        self,
        request_iterator: AsyncIterator[inference_pb2.GenerateRequest],
        context: grpc.aio.ServicerContext[inference_pb2.GenerateRequest, inference_pb2.GenerateResponse],
    ) -> None:
        session = GenerateSession(
            self._engine, self._settings, self._metrics, context.write, self._is_draining, self._tracer
        )
        self._sessions.add(session)
        try:
            await session.run(request_iterator)
        finally:
            self._sessions.discard(session)

    async def GetLoad(
        self,
        request: inference_pb2.GetLoadRequest,
        context: grpc.aio.ServicerContext[inference_pb2.GetLoadRequest, inference_pb2.GetLoadResponse],
    ) -> inference_pb2.GetLoadResponse:
        load = load_to_proto(self._engine.load(), self._settings.replica_id, draining=self._is_draining())
        return inference_pb2.GetLoadResponse(load=load)

    async def GetModelInfo(
        self,
        request: inference_pb2.GetModelInfoRequest,
        context: grpc.aio.ServicerContext[inference_pb2.GetModelInfoRequest, inference_pb2.GetModelInfoResponse],
    ) -> inference_pb2.GetModelInfoResponse:
        return model_info_to_proto(self._engine.info, self._settings.replica_id)
