"""The turn's answer: one generation over the history and the tool results, streamed to the client as it comes.

In: the turn's StartTurn, the session's system prompt and rendered history,
the tool round's results. Out: ``TextDelta`` events as the answer streams,
then the generation's ``GenerationDone`` (the agent loop records the turn from
it). The prompt carries the results as tool messages and, when every tool wrote
a summary, opens with those summaries (``prompt.answer_opening``): the client
sees the tools' own numbers at once, and the model continues from them.

The answer writes what it has done into the turn's ``TurnProgress`` as it goes
(time to first token, the prompt and the text so far), so a turn stopped
mid-answer still reports an estimate of what the answer cost; once the
generation finishes its exact counts replace the estimate. Cancelling the
consumer cancels the generation (its engine request is aborted).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator

from opentelemetry import trace

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from services.router.metrics import RouterMetrics
from services.router.replicas.generation import GenerationDone, GenerationSpec, Generator, annotate
from services.router.serving.convert import text_delta
from services.router.turn.progress import TurnProgress
from services.router.turn.prompt import Message, answer_messages, answer_opening, tool_messages
from services.router.turn.tool_round import ToolResults


class Answerer:
    """Writes turns' answers with ``generator``; ``max_tokens`` unless the turn asks, the opening if enabled.

    An answer without tool results or earlier turns (a session's plain first chat) gets ``repetition_penalty``
    unless the turn sets one: greedy decoding on a small model echoes the message, recites the system prompt or
    loops without it (EVAL.md's chat section measures it). An answer over tool results or over a conversation
    gets none: the penalty weighs on the prompt's tokens too, and such an answer should repeat the tools'
    numbers or what was said before ("What is the code word?" of a word given a turn earlier lost it at 1.2).
    """

    def __init__(
        self,
        generator: Generator,
        *,
        max_tokens: int,
        opening: bool,
        repetition_penalty: float = 1.0,
        metrics: RouterMetrics | None = None,
        tracer: trace.Tracer | None = None,
    ) -> None:
        self._generator = generator
        self._max_tokens = max_tokens
        self._opening = opening
        self._repetition_penalty = repetition_penalty
        self._metrics = metrics
        self._tracer = tracer or trace.get_tracer("agentmesh.router")

    async def stream(
        self,
        start: agent_pb2.StartTurn,
        progress: TurnProgress,
        *,
        system_prompt: str,
        history: list[Message],
        tools: ToolResults,
    ) -> AsyncGenerator[agent_pb2.ConverseResponse | GenerationDone, None]:
        """The answer's TextDeltas, then its GenerationDone (always last)."""
        p = progress
        t0 = time.perf_counter()
        results = tools.results
        opening = answer_opening(results) if results and self._opening else ""
        messages = answer_messages(
            system_prompt, history, start.message, tool_messages(results, tools.arguments), opening
        )
        done: GenerationDone | None = None
        answer = p.answer_text
        p.answer_prompt = messages
        with self._tracer.start_as_current_span("agent.answer") as span:
            spec = GenerationSpec(
                messages,
                self._sampling(start.sampling, plain=not results and not history),
                start.priority or common_pb2.PRIORITY_P1,
                sampling_field="start_turn.sampling",
                continue_final=bool(opening),
            )
            if opening:
                p.ttft_s = self._first_token(p.started)
                answer.append(opening)
                yield text_delta(p.turn_id, opening)
            async with contextlib.aclosing(self._generator.stream(spec)) as pieces:
                async for piece in pieces:
                    p.answering_s = time.perf_counter() - t0
                    if piece.text:
                        if not answer:
                            p.ttft_s = self._first_token(p.started)
                        answer.append(piece.text)
                        yield text_delta(p.turn_id, piece.text)
                    if piece.done is not None:
                        done = piece.done
            if done is None:  # the generator always ends with done; a bug otherwise
                raise RuntimeError("generation ended without a result")
            annotate(span, done)
        p.answering_s = time.perf_counter() - t0
        p.counters.add(done, self._metrics)
        p.answer_prompt = []  # counted exactly now
        yield done

    def _sampling(self, requested: common_pb2.SamplingParams, *, plain: bool) -> common_pb2.SamplingParams:
        """The turn's sampling, greedy and ``max_tokens`` long unless it says otherwise; a ``plain`` answer (no
        tool results) with the plain-chat repetition penalty unless it sets its own."""
        sampling = common_pb2.SamplingParams()
        sampling.CopyFrom(requested)
        if not sampling.HasField("temperature"):
            sampling.temperature = 0.0
        if not sampling.HasField("max_tokens"):
            sampling.max_tokens = self._max_tokens
        if plain:
            default_repetition_penalty(sampling, self._repetition_penalty)
        return sampling

    def _first_token(self, turn_start: float) -> float:
        ttft = time.perf_counter() - turn_start
        if self._metrics is not None:
            self._metrics.ttft.observe(ttft)
        return ttft


def default_repetition_penalty(sampling: common_pb2.SamplingParams, penalty: float) -> None:
    """Give ``sampling`` the plain-chat ``penalty`` unless it names its own (1 leaves it unset: none)."""
    if not sampling.HasField("repetition_penalty") and penalty != 1.0:
        sampling.repetition_penalty = penalty
