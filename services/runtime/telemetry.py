"""Tracing setup: a TracerProvider per process with the configured exporter.

Exporters: ``none`` (spans are created for context propagation but not sent),
``otlp`` (gRPC OTLP to a collector), ``console`` (JSON lines on stderr, for
debugging). Tests pass their own provider with an in-memory exporter instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, cast

from opentelemetry import propagate, trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from services.runtime.config import ServiceConfig
from services.runtime.sampling import BaggageSampler

Exporter = Literal["none", "otlp", "console"]


def setup_tracing(
    service_name: str,
    exporter: Exporter,
    endpoint: str,
    *,
    sample_ratio: float = 1.0,
    forced_tenants: Iterable[str] = (),
) -> TracerProvider:
    """Build the process's TracerProvider and make it (and W3C propagation) global.

    The global is set because libraries look there; our interceptors are given
    the provider explicitly. Sampling honours baggage (``sampling.BaggageSampler``).
    """
    provider = TracerProvider(
        resource=Resource.create({"service.name": service_name}),
        sampler=BaggageSampler(sample_ratio, forced_tenants),
    )
    if exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True)))
    elif exporter == "console":
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(provider)
    propagate.set_global_textmap(CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()]))
    return provider


def tracing_for(config: ServiceConfig) -> TracerProvider:
    """``setup_tracing`` with a service's configured exporter and sampling."""
    return setup_tracing(
        config.SERVICE_NAME,
        cast(Exporter, config.otel_exporter),
        config.otel_endpoint,
        sample_ratio=config.trace_sample_ratio,
        forced_tenants=config.trace_tenants,
    )
