"""One Generate stream: many requests multiplexed in, coalesced frames out.

Data flow::

    caller ──submit/abort──▶ GenerateSession.run ──task per request──▶ Engine.generate
                                                                          │ updates
    caller ◀──frames── writer task ◀── pending deltas (merged per request) ◀┘

Each request task first prepares its request (chat template, tokenization) on
a worker thread, so a long prompt never stalls the other streams on the event
loop; then it merges its engine updates into ``pending`` (one delta per
request) and wakes the writer. The writer yields to the event loop once, so
every request that advanced in the same engine step lands in the same frame,
then sends one frame with all of them: coalescing never holds a token longer
than one loop turn. A slow reader makes deltas grow, not frames pile up. A
request submitted with a ``flush_interval`` (the router's, which relays text
at that rate anyway) is held longer: its first text and its end go at once;
after each send, its text waits for the first engine step at or after the next
flush tick (``runtime/flush.py``: ticks shared by every request, so the held
requests of a step go together), and goes with that step's. No timer: a hold
ends with an update, so an engine slower than the interval is not delayed at
all, and at a fast steady cadence the replica sends, and the router reads, one
frame per tick instead of one per engine step.

The per-id dispatch is ``runtime/mux_server.py``'s: when the caller
half-closes, in-flight requests finish first; when the caller goes away, every
request is cancelled, which aborts it in the engine. What is this session's own:
per-request failures (bad input, deadline, engine death) end that request with
an error in its final delta (and its token count so far); the stream and its
other requests go on.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.context import Context

from agentmesh.inference.v1 import inference_pb2
from services.inference.convert import (
    FINISH_REASONS,
    load_to_proto,
    request_from_proto,
    usage_to_proto,
)
from services.inference.engine import Engine, FinishReason, GenerationRequest, Usage
from services.inference.metrics import InferenceMetrics
from services.runtime.errors import (
    AgentMeshError,
    DeadlineExceeded,
    InvalidArgument,
    to_request_error,
)
from services.runtime.flush import next_tick
from services.runtime.interceptors.tracing import extract_context
from services.runtime.mux_server import MuxServer
from services.runtime.protoutil import duration

log = logging.getLogger(__name__)

Write = Callable[[inference_pb2.GenerateResponse], Awaitable[None]]


@dataclass(frozen=True)
class SessionSettings:
    replica_id: str
    default_max_tokens: int
    load_interval_s: float = 0.5
    #: Merge the deltas of one engine step into one frame (off: a frame per request update; for benchmarks).
    coalesce: bool = True


class GenerateSession(MuxServer[inference_pb2.GenerateRequest, inference_pb2.GenerateResponse]):
    """See module docstring. One instance per Generate call."""

    def __init__(  # noqa: PLR0917 - collaborators, passed explicitly
        self,
        engine: Engine,
        settings: SessionSettings,
        metrics: InferenceMetrics | None,
        write: Write,
        is_draining: Callable[[], bool] = lambda: False,
        tracer: trace.Tracer | None = None,
    ) -> None:
        super().__init__(write, name="generate")
        self._tracer = tracer or trace.get_tracer("agentmesh.inference")
        self._engine = engine
        self._settings = settings
        self._metrics = metrics
        self._is_draining = is_draining
        self._stream_id = uuid.uuid4().hex[:12]
        self._with_ids: set[str] = set()  # requests that asked for token ids
        self._pending: dict[str, inference_pb2.GenerationDelta] = {}
        self._held: set[str] = set()  # requests whose pending delta waits for their next flush tick
        self._load_due = True

    async def run(self, requests: AsyncIterator[inference_pb2.GenerateRequest]) -> None:
        writer = asyncio.create_task(self._write_frames(), name=f"generate-writer-{self._stream_id}")
        try:
            await super().run(requests)
            await self._flush()  # the caller half-closed and every request finished
        finally:
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)

    def request_load_report(self) -> None:
        """Send a load report with the next frame (now, if idle)."""
        self._load_due = True
        self.wake_writer()

    # -- requests ---------------------------------------------------------

    async def received(self, message: inference_pb2.GenerateRequest) -> None:
        action = message.WhichOneof("action")
        if action == "submit":
            self._submit(message.submit)
        elif action == "abort" and not self.cancel(message.abort.request_id):
            log.debug("abort of unknown request %r ignored", message.abort.request_id)

    def _submit(self, submit: inference_pb2.SubmitGeneration) -> None:
        try:
            if self.is_live(submit.request_id):
                raise InvalidArgument.field("submit.request_id", "duplicates a live request on this stream")
            request = request_from_proto(
                submit,
                default_max_tokens=self._settings.default_max_tokens,
                max_output_tokens=self._engine.info.max_output_tokens,
            )
        except AgentMeshError as exc:
            self._finish_with_error(submit.request_id, exc)
            return
        timeout = submit.timeout.ToNanoseconds() / 1e9 if submit.HasField("timeout") else None
        parent = extract_context(dict(submit.trace_context))
        if submit.return_token_ids:
            self._with_ids.add(request.request_id)
        hold = submit.flush_interval.ToNanoseconds() / 1e9 if submit.HasField("flush_interval") else 0.0
        self.start(request.request_id, self._traced(request, timeout, parent, hold))

    async def _traced(
        self, request: GenerationRequest, timeout_s: float | None, parent: Context, hold_s: float
    ) -> None:
        """Prepare the request off the event loop, then run it under its own span, a child of the caller's
        (the stream outlives any one trace). Rendering the chat template and tokenizing a long prompt take
        milliseconds of CPU: on the loop they would stall every other stream of this replica."""
        attributes: dict[str, str | int] = {
            "agentmesh.request_id": request.request_id,
            "agentmesh.priority": request.priority,
        }
        with self._tracer.start_as_current_span("inference.generate", context=parent, attributes=attributes) as span:
            await self._run_request(request, timeout_s, span, hold_s)

    async def _run_request(
        self, request: GenerationRequest, timeout_s: float | None, span: trace.Span, hold_s: float = 0.0
    ) -> None:
        rid = request.request_id
        start = time.perf_counter()
        last: float | None = None
        ttft = 0.0
        emitted = 0
        shown = False  # some text of this request has been let go (the first text is never held)
        hold_until = 0.0  # with hold_s: the flush tick before which its text waits for the next tick
        try:
            async with asyncio.timeout(timeout_s):
                prepared = await asyncio.to_thread(self._engine.prepare, request)
                span.set_attribute("agentmesh.prompt_tokens", len(prepared.prompt_token_ids))
                async for update in self._engine.generate(prepared, f"{self._stream_id}-{rid}"):
                    now = time.perf_counter()
                    if update.token_ids and self._metrics is not None and self._metrics.per_request:
                        if last is None:
                            self._metrics.ttft.observe(now - start)
                        else:
                            gap = (now - last) / len(update.token_ids)
                            for _ in update.token_ids:
                                self._metrics.itl.observe(gap)
                    if update.token_ids:
                        if last is None:
                            ttft = now - start
                        last = now
                        emitted += len(update.token_ids)
                    delta = self._delta(rid)
                    delta.text += update.text
                    delta.token_count += len(update.token_ids)
                    if rid in self._with_ids:
                        delta.token_ids.extend(update.token_ids)
                    if update.finished is not None:
                        f = update.finished
                        result = delta.result
                        result.finish_reason = FINISH_REASONS[f.reason]
                        result.usage.CopyFrom(usage_to_proto(f.usage))
                        if last is not None:
                            result.time_to_first_token.CopyFrom(duration(ttft))
                        if f.queue_time_s is not None:
                            result.queue_time.CopyFrom(duration(f.queue_time_s))
                        if f.continuation is not None:
                            result.continuation.logprob = f.continuation.logprob
                            result.continuation.tokens = f.continuation.tokens
                        self._record_finish(f.reason, now - start, f.usage)
                    if not self._settings.coalesce:
                        await self.send(inference_pb2.GenerateResponse(deltas=[self._pending.pop(rid)]))
                        continue
                    tick = time.monotonic()
                    if hold_s > 0 and shown and update.finished is None and tick < hold_until:
                        self._held.add(rid)  # held: the first update at or after the tick lets it go
                        continue
                    self._held.discard(rid)
                    shown = shown or bool(delta.text)
                    if hold_s > 0:
                        hold_until = next_tick(tick, hold_s)
                    self.wake_writer()
        except TimeoutError:
            self._finish_with_error(
                rid, DeadlineExceeded(f"request {rid} ran past its timeout"), FinishReason.ABORTED, emitted
            )
        except asyncio.CancelledError:
            if not self.cancelled(rid):
                raise  # the stream is going away; nobody to tell
            self._finish(rid, FinishReason.ABORTED, emitted)
        except AgentMeshError as exc:
            self._finish_with_error(rid, exc, FinishReason.ERROR, emitted)
        except Exception:
            log.exception("request %s failed in the engine", rid)
            self._finish_with_error(rid, AgentMeshError("internal error"), FinishReason.ERROR, emitted)
        finally:
            self._with_ids.discard(rid)
            self._held.discard(rid)

    def _record_finish(self, reason: FinishReason, elapsed: float, usage: Usage) -> None:
        if self._metrics is None:
            return
        self._metrics.requests.labels(reason.value).inc()
        if not self._metrics.per_request:
            return
        self._metrics.e2e.observe(elapsed)
        self._metrics.prompt_tokens.inc(usage.prompt_tokens)
        self._metrics.completion_tokens.inc(usage.completion_tokens)
        self._metrics.cached_prompt_tokens.inc(usage.cached_prompt_tokens)

    # -- frames -----------------------------------------------------------

    def _delta(self, request_id: str) -> inference_pb2.GenerationDelta:
        delta = self._pending.get(request_id)
        if delta is None:
            delta = self._pending[request_id] = inference_pb2.GenerationDelta(request_id=request_id)
        return delta

    def _finish(self, request_id: str, reason: FinishReason, completion_tokens: int) -> None:
        self._held.discard(request_id)
        delta = self._delta(request_id)
        delta.result.finish_reason = FINISH_REASONS[reason]
        delta.result.usage.completion_tokens = completion_tokens
        if self._metrics is not None:
            self._metrics.requests.labels(reason.value).inc()
        self.wake_writer()

    def _finish_with_error(
        self,
        request_id: str,
        error: AgentMeshError,
        reason: FinishReason = FinishReason.ERROR,
        completion_tokens: int = 0,
    ) -> None:
        self._finish(request_id, reason, completion_tokens)
        self._delta(request_id).result.error.CopyFrom(to_request_error(error))

    async def _flush(self) -> None:
        await self.send_built(self._frame)

    def _frame(self) -> inference_pb2.GenerateResponse | None:
        """What accumulated since the last frame, less what waits for a flush tick (built when the stream is
        free: a slow reader gets larger frames); None when there is nothing to send."""
        if self._held:
            ready = [d for rid, d in self._pending.items() if rid not in self._held]
            for delta in ready:
                del self._pending[delta.request_id]
        else:
            ready = list(self._pending.values())
            self._pending.clear()
        if not ready and not self._load_due:
            return None
        frame = inference_pb2.GenerateResponse(deltas=ready)
        if self._load_due:
            self._load_due = False
            frame.load.CopyFrom(
                load_to_proto(self._engine.load(), self._settings.replica_id, draining=self._is_draining())
            )
        return frame

    async def _write_frames(self) -> None:
        """One frame per wake-up (``write_coalesced``): the deltas of every request that advanced, plus a load
        report when due; a timer marks the report due and wakes the writer."""
        loop = asyncio.get_running_loop()
        interval = self._settings.load_interval_s
        timer: asyncio.TimerHandle | None = None

        def load_due() -> None:
            nonlocal timer
            self._load_due = True
            self.wake_writer()
            timer = loop.call_later(interval, load_due)

        timer = loop.call_later(interval, load_due)
        try:
            await self.write_coalesced(self._frame)
        finally:
            if timer is not None:
                timer.cancel()
