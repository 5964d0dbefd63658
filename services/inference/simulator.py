"""A deterministic simulated engine for routing, overload and mesh-overhead experiments.

It runs many replicas on a 2-core box because it computes nothing: a single
scheduler task does continuous batching over simulated time.

Latency model, per engine step (all tunable in ``SimulatorSettings``)::

    step_s = decode_base_s + decode_per_seq_s * running
           + prefill_s_per_token * uncached prompt tokens of requests admitted this step

Requests wait (priority first, then arrival) until one of ``max_batch`` slots
frees; a request's first token comes out of the step that admits it, then one
token per step. The prefix cache hashes full ``block_size``-token blocks of
the prompt as a chain (block i's key covers blocks 0..i, as vLLM does; the
request's ``cache_salt`` seeds the chain, as vLLM's does) into an LRU of
``cache_blocks`` entries; the leading run of hits is the cached prefix
and costs no prefill. Load reports use the same figures as the vLLM engine.

What it reads and writes (tokens, prompts, output text) is in ``sim_text``.
Nothing is random: the same request gives the same output and timing on every
replica. Sampling other than ``max_tokens`` (temperature, top-p/k, seed, stop
strings, the presence, frequency and repetition penalties) is validated as for
vLLM (``convert.py``) and then ignored: the text is not a model's to change.
A scored continuation (``SubmitGeneration.scoring``) costs its prefill and
one step and scores 0: with no model, every candidate ties.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field

from services.inference.engine import (
    ContinuationScore,
    Engine,
    EngineDead,
    Finished,
    FinishReason,
    GenerationRequest,
    GenerationUpdate,
    Load,
    ModelInfo,
    PreparedRequest,
    Usage,
    check_fits,
)
from services.inference.sim_text import output_pieces, render_chat, tokenize

TIMELINES_KEPT = 10_000


@dataclass(frozen=True)
class SimulatorSettings:
    prefill_s_per_token: float = 0.0002
    decode_base_s: float = 0.010
    decode_per_seq_s: float = 0.0005
    max_batch: int = 32
    block_size: int = 16
    cache_blocks: int = 4096
    max_model_len: int = 4096
    max_output_tokens: int = 1024
    #: Tokens generated when max_tokens allows (then FINISH_REASON_STOP).
    output_tokens: int = 64
    model_id: str = "simulator"
    #: Real seconds slept per simulated second (1: real time; 0: as fast as possible, for tests).
    time_scale: float = 1.0


@dataclass
class Timeline:
    """Simulated-clock timestamps of one request (seconds since the engine started)."""

    arrived: float
    first_token: float | None = None
    last_token: float | None = None
    tokens: int = 0


@dataclass
class _Sequence:
    prepared: PreparedRequest
    engine_id: str
    output: list[str]
    queue: asyncio.Queue[GenerationUpdate | None]
    arrived: float
    emitted: int = 0
    cached_tokens: int = 0
    admitted_at: float | None = None
    priority_key: tuple[int, float] = field(default=(0, 0.0))


class SimulatorEngine(Engine):
    """See module docstring."""

    def __init__(self, settings: SimulatorSettings | None = None) -> None:
        self.settings = settings or SimulatorSettings()
        self._waiting: list[_Sequence] = []
        self._running: list[_Sequence] = []
        self._cache: OrderedDict[bytes, None] = OrderedDict()
        self._queried_tokens = 0
        self._hit_tokens = 0
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._dead = False
        self.steps = 0
        self.submitted = 0
        #: Simulated time: the sum of every step's modelled duration.
        self.clock = 0.0
        #: Per engine request id: when it arrived, got its first and last token (simulated clock).
        #: Bounded to the latest TIMELINES_KEPT requests.
        self.timelines: OrderedDict[str, Timeline] = OrderedDict()

    @property
    def info(self) -> ModelInfo:
        s = self.settings
        return ModelInfo(
            model_id=s.model_id,
            engine="simulator",
            engine_version="1",
            max_model_len=s.max_model_len,
            max_output_tokens=s.max_output_tokens,
            kv_block_size=s.block_size,
            supports_structured_output=True,
        )

    async def start(self) -> None:
        self._loop_task = asyncio.create_task(self._schedule_loop(), name="simulator-scheduler")

    async def close(self) -> None:
        if self._loop_task is not None:
            self._loop_task.cancel()
            await asyncio.gather(self._loop_task, return_exceptions=True)

    def kill(self) -> None:
        """Simulate the engine dying: in-flight and new requests fail with EngineDead."""
        self._dead = True
        for seq in self._waiting + self._running:
            seq.queue.put_nowait(None)
        self._waiting.clear()
        self._running.clear()

    @property
    def dead(self) -> bool:
        return self._dead

    def prepare(self, request: GenerationRequest) -> PreparedRequest:
        ids = tokenize(render_chat(request))
        scored_from = None
        if request.continuation is not None:
            scored_from, ids = len(ids), ids + tokenize(request.continuation)
        check_fits(request, len(ids), self.settings.max_model_len)
        return PreparedRequest(request=request, prompt_token_ids=ids, scored_from=scored_from)

    async def generate(
        self, prepared: PreparedRequest, engine_request_id: str
    ) -> AsyncGenerator[GenerationUpdate, None]:
        if self._dead:
            raise EngineDead()
        seq = _Sequence(
            prepared=prepared,
            engine_id=engine_request_id,
            output=output_pieces(prepared, self.settings.output_tokens),
            queue=asyncio.Queue(),
            arrived=time.monotonic(),
        )
        seq.priority_key = (prepared.request.priority, seq.arrived)
        self.timelines[engine_request_id] = Timeline(arrived=self.clock)
        if len(self.timelines) > TIMELINES_KEPT:
            self.timelines.popitem(last=False)
        self.submitted += 1
        self._waiting.append(seq)
        self._wake.set()
        try:
            while True:
                update = await seq.queue.get()
                if update is None:
                    raise EngineDead()
                yield update
                if update.finished is not None:
                    return
        finally:
            self._remove(seq)

    def _remove(self, seq: _Sequence) -> None:
        if seq in self._waiting:
            self._waiting.remove(seq)
        if seq in self._running:
            self._running.remove(seq)

    def load(self) -> Load:
        used = len(self._cache) / self.settings.cache_blocks if self.settings.cache_blocks else 0.0
        rate = self._hit_tokens / self._queried_tokens if self._queried_tokens else 0.0
        return Load(
            running=len(self._running),
            waiting=len(self._waiting),
            kv_cache_usage=min(1.0, used),
            prefix_cache_hit_rate=rate,
            max_running=self.settings.max_batch,
        )

    def unfinished_requests(self) -> int:
        return len(self._running) + len(self._waiting)

    def _lookup_and_insert(self, ids: tuple[int, ...], salt: str = "") -> int:
        """Cached prefix length in tokens; the prompt's full blocks become most recently used."""
        size = self.settings.block_size
        h = hashlib.sha256(salt.encode())
        hits, still_hitting = 0, True
        for start in range(0, len(ids) - len(ids) % size, size):
            h.update(repr(ids[start : start + size]).encode())
            key = h.digest()
            if still_hitting and key in self._cache:
                hits += size
            else:
                still_hitting = False
            self._cache[key] = None
            self._cache.move_to_end(key)
            while len(self._cache) > self.settings.cache_blocks:
                self._cache.popitem(last=False)
        return hits

    async def _schedule_loop(self) -> None:
        s = self.settings
        while True:
            if not self._waiting and not self._running:
                self._wake.clear()
                await self._wake.wait()
            self._waiting.sort(key=lambda q: q.priority_key)
            admitted: list[_Sequence] = []
            while self._waiting and len(self._running) < s.max_batch:
                seq = self._waiting.pop(0)
                ids = seq.prepared.prompt_token_ids
                seq.cached_tokens = self._lookup_and_insert(ids, seq.prepared.request.cache_salt)
                # vLLM never serves the whole prompt from cache: the last token is recomputed.
                seq.cached_tokens = min(seq.cached_tokens, len(ids) - 1)
                self._queried_tokens += len(ids)
                self._hit_tokens += seq.cached_tokens
                seq.admitted_at = time.monotonic()
                self._running.append(seq)
                admitted.append(seq)
            uncached = sum(len(q.prepared.prompt_token_ids) - q.cached_tokens for q in admitted)
            step = s.decode_base_s + s.decode_per_seq_s * len(self._running) + s.prefill_s_per_token * uncached
            await asyncio.sleep(step * s.time_scale)
            self.clock += step
            self.steps += 1
            for seq in list(self._running):
                self._advance(seq)

    def _advance(self, seq: _Sequence) -> None:
        req = seq.prepared.request
        word = seq.output[seq.emitted]
        seq.emitted += 1
        timeline = self.timelines.get(seq.engine_id)
        if timeline is not None:
            if timeline.first_token is None:
                timeline.first_token = self.clock
            timeline.last_token = self.clock
            timeline.tokens = seq.emitted
        text = word
        reason: FinishReason | None = None
        if seq.emitted >= len(seq.output):
            reason = FinishReason.STOP
        elif seq.emitted >= req.sampling.max_tokens:
            reason = FinishReason.LENGTH
        finished = None
        scored_from = seq.prepared.scored_from
        if reason is not None:
            self._running.remove(seq)
            ids = seq.prepared.prompt_token_ids
            finished = Finished(
                reason=reason,
                usage=Usage(len(ids), seq.emitted, seq.cached_tokens),
                queue_time_s=(seq.admitted_at or seq.arrived) - seq.arrived,
                continuation=None if scored_from is None else ContinuationScore(0.0, len(ids) - scored_from),
            )
        if scored_from is not None:  # a scoring outputs no text
            seq.queue.put_nowait(GenerationUpdate(text="", token_ids=(), finished=finished))
            return
        seq.queue.put_nowait(GenerationUpdate(text=text, token_ids=tokenize(text) or (0,), finished=finished))
