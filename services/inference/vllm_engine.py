"""The vLLM engine: AsyncLLM with automatic prefix caching and priority scheduling.

One AsyncLLM per process holds one KV cache shared by every request and
session (automatic prefix caching), schedules by priority, and constrains
output with xgrammar (``disable_any_whitespace``: without it the small model
pads JSON with whitespace forever). Chat prompts are rendered with the model's
chat template here and passed as token ids, so the prompt length is known
(and checked) before the engine sees it. A continuation to score is tokenised
on its own and appended; the engine runs one step with the prompt's
log-probabilities on (which reads no prefix cache: vLLM computes every
prompt position then) and the sum over the continuation's positions is the
score. Load figures come from a stat logger fed by the engine's scheduler
stats every step (``vllm_stats``).

vLLM starts its engine core with multiprocessing *spawn*: this module imports
vLLM lazily, inside ``start``, and does nothing at import time.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from services.inference.chat import supports_tool_role, template_messages
from services.inference.engine import (
    ChatTurn,
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
    Sampling,
    Usage,
    check_fits,
)
from services.inference.vllm_stats import LoadSink, engine_version, stat_logger_factory
from services.runtime.errors import InvalidArgument

log = logging.getLogger(__name__)

WARMUP_SCHEMA = '{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}'


@dataclass(frozen=True)
class VllmSettings:
    model: str
    model_id: str
    dtype: str = "float32"
    max_model_len: int = 2048
    max_num_seqs: int = 32
    max_num_batched_tokens: int = 0
    gpu_memory_utilization: float = 0.9
    tensor_parallel_size: int = 1
    enforce_eager: bool = True
    cpu_kv_cache_gib: float = 1.0
    block_size: int = 0
    max_output_tokens: int = 1024
    warmup: bool = True


class VllmEngine(Engine):
    """See module docstring."""

    def __init__(self, settings: VllmSettings) -> None:
        self.settings = settings
        self._llm: Any = None
        self._tokenizer: Any = None
        self._tool_role: bool | None = None
        self._sink = LoadSink()
        self._info: ModelInfo | None = None

    @property
    def info(self) -> ModelInfo:
        if self._info is None:
            raise RuntimeError("engine not started")
        return self._info

    async def start(self) -> None:
        s = self.settings
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(max(1, round(s.cpu_kv_cache_gib))))
        from transformers import AutoTokenizer
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        kwargs: dict[str, Any] = {
            "model": s.model,
            "served_model_name": s.model_id,
            "dtype": s.dtype,
            "max_model_len": s.max_model_len,
            "max_num_seqs": s.max_num_seqs,
            "gpu_memory_utilization": s.gpu_memory_utilization,
            "tensor_parallel_size": s.tensor_parallel_size,
            "enforce_eager": s.enforce_eager,
            "enable_prefix_caching": True,
            "scheduling_policy": "priority",
            "structured_outputs_config": {"backend": "xgrammar", "disable_any_whitespace": True},
        }
        if s.max_num_batched_tokens:
            kwargs["max_num_batched_tokens"] = s.max_num_batched_tokens
        if s.block_size:
            kwargs["block_size"] = s.block_size
        args = AsyncEngineArgs(**kwargs)
        self._tokenizer = AutoTokenizer.from_pretrained(s.model)
        self._llm = AsyncLLM.from_engine_args(args, stat_loggers=[stat_logger_factory(self._sink)])
        block = int(self._llm.vllm_config.cache_config.block_size)
        self._info = ModelInfo(
            model_id=s.model_id,
            engine="vllm",
            engine_version=engine_version(),
            max_model_len=s.max_model_len,
            max_output_tokens=s.max_output_tokens,
            kv_block_size=block,
            supports_structured_output=True,
        )
        if s.warmup:
            await self._warm_up()

    async def _warm_up(self) -> None:
        """One plain and one structured generation, so the first caller pays no compile cost."""
        sampling = Sampling(temperature=0.0, top_p=1.0, top_k=0, max_tokens=8, seed=None, stop=())
        for i, schema in enumerate((None, WARMUP_SCHEMA)):
            request = GenerationRequest(
                request_id=f"warmup-{i}",
                prompt=(ChatTurn("user", "Say hello."),),
                sampling=sampling,
                priority=0,
                json_schema=schema,
                add_generation_prompt=True,
            )
            async for _ in self.generate(self.prepare(request), f"warmup-{i}"):
                pass

    async def close(self) -> None:
        if self._llm is not None:
            self._llm.shutdown()
            self._llm = None

    @property
    def dead(self) -> bool:
        return self._llm is not None and bool(self._llm.errored)

    def prepare(self, request: GenerationRequest) -> PreparedRequest:
        if isinstance(request.prompt, str):
            ids = self._tokenizer(request.prompt).input_ids
        else:
            if self._tool_role is None:
                self._tool_role = supports_tool_role(self._tokenizer)
            messages = template_messages(request.prompt, tool_role=self._tool_role)
            try:
                ids = self._tokenizer.apply_chat_template(
                    messages,
                    tokenize=True,
                    add_generation_prompt=request.add_generation_prompt and not request.continue_final_message,
                    continue_final_message=request.continue_final_message,
                    return_dict=False,
                )
            except Exception as exc:  # the template rejects odd role sequences
                raise InvalidArgument.field("submit.chat.messages", f"cannot apply the chat template: {exc}") from None
        scored_from = None
        if request.continuation is not None:
            scored_from = len(ids)
            ids = [*ids, *self._tokenizer(request.continuation, add_special_tokens=False).input_ids]
        check_fits(request, len(ids), self.settings.max_model_len)
        return PreparedRequest(request=request, prompt_token_ids=tuple(int(i) for i in ids), scored_from=scored_from)

    def _sampling_params(self, request: GenerationRequest) -> Any:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

        s = request.sampling
        kwargs: dict[str, Any] = {
            "n": 1,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "max_tokens": s.max_tokens,
            "seed": s.seed,
            "stop": list(s.stop) or None,
            "presence_penalty": s.presence_penalty,
            "frequency_penalty": s.frequency_penalty,
            "repetition_penalty": s.repetition_penalty,
            "output_kind": RequestOutputKind.DELTA,
        }
        if s.top_k > 0:
            kwargs["top_k"] = s.top_k
        if request.continuation is not None:  # each prompt token's own log-probability, no alternatives
            kwargs["prompt_logprobs"] = 0
        if request.json_schema:
            kwargs["structured_outputs"] = StructuredOutputsParams(
                json=request.json_schema, disable_any_whitespace=True
            )
        return SamplingParams(**kwargs)

    async def generate(
        self, prepared: PreparedRequest, engine_request_id: str
    ) -> AsyncGenerator[GenerationUpdate, None]:
        from vllm.inputs import TokensPrompt
        from vllm.v1.engine.exceptions import EngineDeadError, EngineGenerateError

        if self._llm is None or self.dead:
            raise EngineDead()
        request = prepared.request
        try:
            params = self._sampling_params(request)
        except ValueError as exc:
            raise InvalidArgument.field("submit.sampling", str(exc)) from None
        prompt = TokensPrompt(prompt_token_ids=list(prepared.prompt_token_ids))
        if request.cache_salt:
            # vLLM mixes the salt into the first block's hash: only same-salt requests share blocks.
            prompt["cache_salt"] = request.cache_salt
        completion = 0
        cached = 0
        scored: ContinuationScore | None = None
        try:
            async for out in self._llm.generate(prompt, params, engine_request_id, priority=request.priority):
                o = out.outputs[0]
                completion += len(o.token_ids)
                if prepared.scored_from is not None and out.prompt_logprobs:
                    scored = continuation_score(prepared, out.prompt_logprobs)
                if out.num_cached_tokens:
                    cached = int(out.num_cached_tokens)
                finished = None
                if out.finished:
                    reason = {"length": FinishReason.LENGTH, "abort": FinishReason.ABORTED}.get(
                        str(o.finish_reason), FinishReason.STOP
                    )
                    metrics = out.metrics
                    queue = None
                    if metrics is not None and metrics.scheduled_ts and metrics.queued_ts:
                        queue = max(0.0, float(metrics.scheduled_ts - metrics.queued_ts))
                    usage = Usage(len(prepared.prompt_token_ids), completion, cached)
                    finished = Finished(reason=reason, usage=usage, queue_time_s=queue, continuation=scored)
                if prepared.scored_from is not None:  # the one step's token is no output of a scoring
                    if finished is not None:
                        yield GenerationUpdate(text="", token_ids=(), finished=finished)
                    continue
                yield GenerationUpdate(text=o.text, token_ids=tuple(o.token_ids), finished=finished)
        except EngineDeadError:
            raise EngineDead() from None
        except EngineGenerateError as exc:
            raise InvalidArgument.field("submit", f"the engine rejected the request: {exc}") from None
        except ValueError as exc:  # vLLM's own input validation
            raise InvalidArgument.field("submit", str(exc)) from None

    def load(self) -> Load:
        sink = self._sink
        with sink.lock:
            return Load(
                running=sink.running,
                waiting=sink.waiting,
                kv_cache_usage=sink.kv_cache_usage,
                prefix_cache_hit_rate=sink.hits / sink.queries if sink.queries else 0.0,
                max_running=self.settings.max_num_seqs,
            )

    def unfinished_requests(self) -> int:
        if self._llm is None:
            return 0
        return int(self._llm.output_processor.get_num_unfinished_requests())


def continuation_score(prepared: PreparedRequest, prompt_logprobs: Any) -> ContinuationScore:
    """The summed log-probability of the prompt's scored tail (vLLM gives one entry per prompt position, the first
    None, each mapping token id to its ``Logprob``; with ``prompt_logprobs=0`` only the token read is there)."""
    start = prepared.scored_from or 0
    ids = prepared.prompt_token_ids
    total = 0.0
    for position in range(max(1, start), len(ids)):
        entry = prompt_logprobs[position]
        total += float(entry[ids[position]].logprob)
    return ContinuationScore(logprob=total, tokens=len(ids) - start)
