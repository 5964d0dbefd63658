"""Schema-constrained generation for planning: one greedy generation whose text the grammar shapes.

The LLM judge and the fill both ask the model for JSON under a schema (a
choice, a call, a tool's arguments); this is the one place that runs such a
generation, counts it on the turn and puts where it ran on its span.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry import trace

from agentmesh.common.v1 import common_pb2
from services.router.metrics import RouterMetrics
from services.router.replicas.generation import GenerationDone, GenerationSpec, Generator, annotate
from services.router.turn.progress import TurnCounters
from services.router.turn.prompt import Message


class Structured:
    """Runs constrained generations on the turn's priority and counts them on its counters."""

    def __init__(
        self, generator: Generator, metrics: RouterMetrics | None = None, tracer: trace.Tracer | None = None
    ) -> None:
        self._generator = generator
        self._metrics = metrics
        self._tracer = tracer or trace.get_tracer("agentmesh.router")

    async def __call__(
        self,
        messages: Sequence[Message],
        schema: str,
        priority: common_pb2.Priority.ValueType,
        counters: TurnCounters,
        max_tokens: int,
    ) -> str:
        """One greedy generation constrained to ``schema``; its full text."""
        with self._tracer.start_as_current_span("agent.generation") as span:
            spec = GenerationSpec(
                messages,
                common_pb2.SamplingParams(temperature=0.0, max_tokens=max_tokens),
                priority or common_pb2.PRIORITY_P1,
                json_schema=schema,
            )
            text, done = await to_end(self._generator, spec)
            annotate(span, done)
            counters.add(done, self._metrics)
            return text


async def to_end(generator: Generator, spec: GenerationSpec) -> tuple[str, GenerationDone]:
    """``spec`` run to its end, buffered: its whole text and its done event (a scoring's text is empty)."""
    parts: list[str] = []
    done: GenerationDone | None = None
    async for event in generator.stream(spec):
        parts.append(event.text)
        done = event.done or done
    if done is None:  # the generator always ends with done; a bug otherwise
        raise RuntimeError("generation ended without a result")
    return "".join(parts), done
