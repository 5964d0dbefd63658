"""Trace sampling that honours baggage: force the traces of a tenant, or of one request.

Seed 002 §4.4: the tenant and the sampling wish travel as OpenTelemetry baggage.
A span is sampled when its parent context carries ``agentmesh.sample=1``
(a client or an operator debugging one request) or ``agentmesh.tenant`` names a
tenant in ``forced_tenants`` (``--trace-tenants``); otherwise the parent's
decision, or ``ratio`` of new traces, decides — so a low ratio keeps tracing
cheap without losing the traces someone asked for.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from opentelemetry import baggage, trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace.sampling import Decision, ParentBased, Sampler, SamplingResult, TraceIdRatioBased
from opentelemetry.trace import Link, SpanKind
from opentelemetry.util.types import Attributes

from services.runtime.tenancy import TENANT_BAGGAGE

#: Baggage entry that forces sampling of the trace it travels with ("1").
SAMPLE_BAGGAGE = "agentmesh.sample"


class BaggageSampler(Sampler):
    """See module docstring."""

    def __init__(self, ratio: float = 1.0, forced_tenants: Iterable[str] = ()) -> None:
        self._base = ParentBased(TraceIdRatioBased(ratio))
        self._forced = frozenset(forced_tenants)
        self._ratio = ratio

    def should_sample(  # noqa: PLR0917 - the SDK's Sampler signature
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: trace.TraceState | None = None,
    ) -> SamplingResult:
        wished = baggage.get_all(parent_context)
        if wished.get(SAMPLE_BAGGAGE) == "1" or wished.get(TENANT_BAGGAGE) in self._forced:
            state = trace.get_current_span(parent_context).get_span_context().trace_state
            return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes, state)
        return self._base.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)

    def get_description(self) -> str:
        return f"BaggageSampler(ratio={self._ratio}, forced_tenants={sorted(self._forced)})"
