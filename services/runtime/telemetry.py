"""Tracing setup: a TracerProvider per process with the configured exporter.

Exporters: ``none`` (spans are created for context propagation but not sent),
``otlp`` (gRPC OTLP to a collector), ``console`` (JSON lines on stderr, for
debugging). Tests pass their own provider with an in-memory exporter instead.
"""

from __future__ import annotations

from typing import Literal

from opentelemetry import propagate, trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

Exporter = Literal["none", "otlp", "console"]


def setup_tracing(service_name: str, exporter: Exporter, endpoint: str) -> TracerProvider:
    """Build the process's TracerProvider and make it (and W3C propagation) global.

    The global is set because libraries look there; our interceptors are given
    the provider explicitly.
    """
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    if exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True)))
    elif exporter == "console":
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(provider)
    propagate.set_global_textmap(CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()]))
    return provider
