"""How likely a text is as the model's answer to a prompt: one scoring request, no generation.

The likelihood judge asks, per candidate tool, how likely the user's message
is as a request written for that tool (``judges/likelihood.py``). The replica
reads the prompt and the text in one step and returns the log-probability of
the text's tokens (``SubmitGeneration.scoring``); nothing is generated, so a
scoring is counted on the turn's usage (its prompt tokens) but not as a
generation. Like ``structured.py`` (whose ``to_end`` reads it), this is the
one place that runs one and puts where it ran on its span.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry import trace

from agentmesh.common.v1 import common_pb2
from services.router.planning.structured import to_end
from services.router.replicas.generation import GenerationSpec, Generator, annotate
from services.router.turn.progress import TurnCounters
from services.router.turn.prompt import Message


class Scorer:
    """Scores a continuation after a chat prompt on the turn's priority."""

    def __init__(self, generator: Generator, tracer: trace.Tracer | None = None) -> None:
        self._generator = generator
        self._tracer = tracer or trace.get_tracer("agentmesh.router")

    async def __call__(
        self,
        messages: Sequence[Message],
        continuation: str,
        priority: common_pb2.Priority.ValueType,
        counters: TurnCounters,
    ) -> tuple[float, int]:
        """The summed natural-log probability of ``continuation``'s tokens after ``messages``, and their count."""
        with self._tracer.start_as_current_span("agent.scoring") as span:
            spec = GenerationSpec(
                messages, common_pb2.SamplingParams(), priority or common_pb2.PRIORITY_P1, continuation=continuation
            )
            _, done = await to_end(self._generator, spec)
            if done.continuation is None:  # a replica that answers a scoring answers with one
                raise RuntimeError("scoring ended without a score")
            annotate(span, done)
            counters.usage.prompt_tokens += done.usage.prompt_tokens
            return done.continuation
