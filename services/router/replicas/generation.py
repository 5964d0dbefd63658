"""One generation: response cache, replica choice, streaming, and failover.

In: a ``GenerationSpec`` (chat messages, sampling, priority, optional JSON
schema). Out: ``GenerationEvent``s — text deltas, then one ``done`` with usage,
TTFT, the replica and why it was chosen.

- Deterministic requests (temperature 0) are looked up in the response cache
  (``response_cache.py``); a hit replays the answer in one delta without
  touching any replica, marked ``cached``.
- Streaming: the first text goes out at once; after it, text is sent at most
  about once per ``flush_s`` (``--stream-flush-ms``, default 100), merged, and the rest with the
  result: the submit asks the replica to hold it (``flush_interval``, on flush
  ticks shared by every request), so neither the replica's stream nor this
  generation is woken per engine step. Every message costs each Python hop the same CPU whatever it
  carries, so at a steady token cadence this divides the relay's CPU per token
  by the tokens per message, for at most ``flush_s`` more inter-token latency
  and no change in time to first token (BENCHMARKS.md, relay).
- Candidates come from the picker, best first. A replica that fails before the
  first token is skipped invisibly. One that fails mid-answer is replaced by
  the next candidate, which continues from the text already streamed (the
  partial answer becomes the final assistant message, continued with
  ``continue_final_message``); the caller sees one uninterrupted answer.
  Structured (JSON) generations are buffered and restarted instead, since a
  grammar cannot resume mid-document.
- When no candidate is left: ``Unavailable`` with a clear message.
- Replicas' prefix caches are salted per tenant unless ``share_prefix_cache`` (SECURITY.md).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass

from opentelemetry import trace

from agentmesh.common.v1 import common_pb2
from agentmesh.inference.v1 import inference_pb2
from services.router.metrics import RouterMetrics
from services.router.replicas.addresses import ReplicaSet
from services.router.replicas.link import ReplicaDown, ReplicaLink
from services.router.replicas.picker import Picker, placement_key
from services.router.replicas.response_cache import ResponseCache
from services.router.turn.prompt import Message
from services.runtime.cache import TwoLevelCache
from services.runtime.deadline import Deadline
from services.runtime.errors import (
    AgentMeshError,
    DeadlineExceeded,
    FieldViolation,
    InvalidArgument,
    ResourceExhausted,
    Unavailable,
)
from services.runtime.interceptors.tracing import inject_context
from services.runtime.status_decode import code_from_number
from services.runtime.tenancy import current_tenant, prefix_cache_salt

log = logging.getLogger(__name__)

ROLES = {
    "system": common_pb2.ROLE_SYSTEM,
    "user": common_pb2.ROLE_USER,
    "assistant": common_pb2.ROLE_ASSISTANT,
    "tool": common_pb2.ROLE_TOOL,
}


@dataclass(frozen=True)
class GenerationSpec:
    messages: Sequence[Message]
    sampling: common_pb2.SamplingParams
    priority: common_pb2.Priority.ValueType = common_pb2.PRIORITY_P1
    json_schema: str = ""
    #: Field prefix for errors the replica reports about the request (e.g. "start_turn.sampling").
    sampling_field: str = "sampling"
    #: The last message is a partial assistant message (an answer opening) that the model continues.
    continue_final: bool = False
    #: Score this text as the answer to ``messages`` instead of generating (``SubmitGeneration.scoring``): the
    #: done event carries its log-probability; ``sampling`` is not sent.
    continuation: str = ""

    @property
    def deterministic(self) -> bool:
        return self.sampling.HasField("temperature") and self.sampling.temperature == 0.0


@dataclass
class GenerationDone:
    usage: common_pb2.Usage
    finish_reason: common_pb2.FinishReason.ValueType
    ttft_s: float
    replica: str
    reason: str
    cached: bool = False
    failovers: int = 0
    #: A scoring's result (``GenerationSpec.continuation``): the continuation's summed log-probability and tokens.
    continuation: tuple[float, int] | None = None


@dataclass
class GenerationEvent:
    text: str = ""
    done: GenerationDone | None = None


class Generator:
    def __init__(
        self,
        replicas: ReplicaSet,
        picker: Picker,
        *,
        cache: TwoLevelCache | None,
        metrics: RouterMetrics | None,
        model_id: str = "",
        cache_ttl_s: float = 600.0,
        flush_s: float = 0.0,
        share_prefix_cache: bool = False,
    ) -> None:
        self._share_prefix_cache = share_prefix_cache
        self._flush_s = flush_s
        self._replicas = replicas
        self._picker = picker
        self._cache = None if cache is None else ResponseCache(cache, model_id, cache_ttl_s, metrics)
        self._metrics = metrics

    async def stream(self, spec: GenerationSpec) -> AsyncGenerator[GenerationEvent, None]:
        cache = self._cache if spec.deterministic and not spec.continuation else None
        key = cache.key(spec) if cache is not None else ""
        if cache is not None:
            hit = await cache.get(key)
            if hit is not None:
                start = time.perf_counter()
                text, usage, finish_reason = hit
                if text:
                    yield GenerationEvent(text=text)
                elapsed = time.perf_counter() - start
                yield GenerationEvent(done=GenerationDone(usage, finish_reason, elapsed, "", "cache", cached=True))
                return

        place = placement_key(spec.messages)
        candidates = self._picker.candidates(place, self._replicas.replicas)
        if not candidates:
            raise Unavailable("no inference replica is available", retry_after_s=1.0)
        buffered = bool(spec.json_schema or spec.continuation)
        # The answer is accumulated once, as parts: what the caller has seen (streamed) or, for a buffered
        # (structured) generation, the current attempt's. Nothing is joined per token.
        seen: list[str] = []
        seen_tokens = 0
        start = time.perf_counter()
        first_token_at: float | None = None
        failovers = 0
        last_error = ""
        for choice in candidates:
            link: ReplicaLink = choice.replica  # type: ignore[assignment]
            if not link.breaker.allow():
                continue
            parts = [] if buffered else seen
            tokens = 0
            submit = self._submit(spec, "".join(seen), seen_tokens)
            deltas = link.generate(submit)
            try:
                async for delta in deltas:
                    text = delta.text
                    if text:
                        parts.append(text)
                        if first_token_at is None:
                            first_token_at = time.perf_counter()
                        if not buffered:
                            yield GenerationEvent(text=text)
                    tokens += delta.token_count
                    if not delta.HasField("result"):
                        continue
                    self._raise_for(delta.result, link, spec)
                    link.breaker.record_success()
                    self._picker.served(place, link)
                    result = delta.result
                    if buffered:
                        seen = parts
                        if parts:
                            yield GenerationEvent(text="".join(parts))
                    seen_tokens += tokens
                    usage = common_pb2.Usage()
                    usage.CopyFrom(result.usage)
                    usage.completion_tokens = seen_tokens
                    ttft = (first_token_at or time.perf_counter()) - start
                    if self._metrics is not None:
                        self._metrics.picked(link.target, choice.reason).inc()
                    if cache is not None and result.finish_reason in (
                        common_pb2.FINISH_REASON_STOP,
                        common_pb2.FINISH_REASON_LENGTH,
                    ):
                        await cache.store(key, "".join(seen), usage, result.finish_reason)
                    scored = result.continuation if result.HasField("continuation") else None
                    yield GenerationEvent(
                        done=GenerationDone(
                            usage,
                            result.finish_reason,
                            ttft,
                            link.target,
                            choice.reason,
                            failovers=failovers,
                            continuation=None if scored is None else (scored.logprob, scored.tokens),
                        )
                    )
                    return
                raise ReplicaDown(link.target, "stream ended without a result")
            except ReplicaDown as exc:
                if not buffered:
                    seen_tokens += tokens
                link.breaker.record_failure()
                failovers += 1
                last_error = exc.message
                kind = "mid_answer" if seen else "before_first_token"
                log.warning("generation failed on %s (%s); failing over (%s)", link.target, exc.message, kind)
                if self._metrics is not None:
                    self._metrics.failovers.labels(kind).inc()
            finally:
                await deltas.aclose()  # the request is released here, however it ended (or the consumer left)
        where = " in the middle of the answer" if seen else ""
        raise Unavailable(
            f"every inference replica failed{where}; last error: {last_error or 'none available'}",
            retry_after_s=1.0,
        )

    def _submit(self, spec: GenerationSpec, partial: str, produced: int) -> inference_pb2.SubmitGeneration:
        salt = "" if self._share_prefix_cache else prefix_cache_salt(current_tenant())
        submit = inference_pb2.SubmitGeneration(request_id=uuid.uuid4().hex, priority=spec.priority, cache_salt=salt)
        for m in spec.messages:
            submit.chat.messages.add(role=ROLES[m.role], content=m.content, tool_name=m.tool_name)
        if partial and spec.continue_final:
            submit.chat.messages[-1].content += partial
        elif partial:
            submit.chat.messages.add(role=common_pb2.ROLE_ASSISTANT, content=partial)
        if partial or spec.continue_final:
            submit.chat.continue_final_message = True
        else:
            submit.chat.add_generation_prompt = True
        if spec.continuation:  # nothing is generated: no sampling, the text is read after the generation prompt
            submit.scoring.continuation = spec.continuation
        else:
            submit.sampling.CopyFrom(spec.sampling)
        if partial and spec.sampling.HasField("max_tokens"):
            submit.sampling.max_tokens = max(1, spec.sampling.max_tokens - produced)
        if spec.json_schema:
            submit.structured_output.json_schema = spec.json_schema
        remaining = Deadline.current().remaining()
        if remaining is not None:
            if remaining <= 0:
                raise DeadlineExceeded("the deadline passed before the generation could start")
            submit.timeout.FromNanoseconds(int(remaining * 1e9))
        for k, v in inject_context().items():
            submit.trace_context[k] = v
        if self._flush_s > 0:  # the replica holds the text between ticks (it is relayed at that rate anyway)
            submit.flush_interval.FromNanoseconds(round(self._flush_s * 1e9))
        return submit

    @staticmethod
    def _raise_for(result: inference_pb2.GenerationResult, link: ReplicaLink, spec: GenerationSpec) -> None:
        if not result.HasField("error"):
            return
        error = result.error
        code = code_from_number(error.code)
        if code.name == "UNAVAILABLE":
            raise ReplicaDown(link.target, error.message)
        if code.name == "INVALID_ARGUMENT":
            violations = [
                FieldViolation(
                    v.field.replace("submit.sampling", spec.sampling_field).replace("submit.", ""),
                    v.description,
                )
                for v in error.field_violations
            ]
            raise InvalidArgument(error.message, violations)
        if code.name == "DEADLINE_EXCEEDED":
            raise DeadlineExceeded("the request ran out of time in the inference engine")
        if code.name == "RESOURCE_EXHAUSTED":
            raise ResourceExhausted("the inference engine is overloaded", retry_after_s=1.0)
        raise AgentMeshError(f"generation failed: {error.message}")


def annotate(span: trace.Span, done: GenerationDone) -> None:
    """Where a generation ran and what it cost, on its span."""
    span.set_attribute("agentmesh.replica", done.replica)
    span.set_attribute("agentmesh.replica_reason", done.reason)
    span.set_attribute("agentmesh.cached_prompt_tokens", done.usage.cached_prompt_tokens)
    span.set_attribute("agentmesh.response_cached", done.cached)
    span.set_attribute("agentmesh.failovers", done.failovers)
