"""The response cache: a deterministic generation's answer, stored once as text and replayed in one delta.

Only temperature-0 generations are cached (``GenerationSpec.deterministic``).
The key is the sha256 of the tenant, the model, the messages, every sampling
field that changes the output and the JSON schema, so one tenant never reads
another's answer and a changed penalty is a different answer. An entry is the
whole answer's text with its usage and finish reason: a hit is replayed as one
delta, never token by token, and touches no replica.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from agentmesh.common.v1 import common_pb2
from services.router.metrics import RouterMetrics
from services.runtime.cache import TwoLevelCache, cache_key
from services.runtime.tenancy import current_tenant

if TYPE_CHECKING:
    from services.router.replicas.generation import GenerationSpec


class ResponseCache:
    """Answers of deterministic generations, keyed per tenant, model and request."""

    def __init__(self, cache: TwoLevelCache, model_id: str, ttl_s: float, metrics: RouterMetrics | None) -> None:
        self._cache = cache
        self._model_id = model_id
        self._ttl_s = ttl_s
        self._metrics = metrics

    def key(self, spec: GenerationSpec) -> str:
        s = spec.sampling
        sampling = {
            "temperature": s.temperature,
            "top_p": s.top_p if s.HasField("top_p") else None,
            "top_k": s.top_k,
            "max_tokens": s.max_tokens if s.HasField("max_tokens") else None,
            "seed": s.seed if s.HasField("seed") else None,
            "stop": list(s.stop),
        }
        for penalty in ("presence_penalty", "frequency_penalty", "repetition_penalty"):
            if s.HasField(penalty):  # only when set: the keys of requests without penalties stay as they were
                sampling[penalty] = getattr(s, penalty)
        messages = [list(m) for m in spec.messages]
        return cache_key("response", current_tenant(), self._model_id, messages, sampling, spec.json_schema)

    async def get(self, key: str) -> tuple[str, common_pb2.Usage, common_pb2.FinishReason.ValueType] | None:
        """The stored answer (text, usage, finish reason), or None; counted as a hit or a miss."""
        hit, _level = await self._cache.get(key)
        if self._metrics is not None:
            (self._metrics.cache_misses if hit is None else self._metrics.cache_hits).inc()
        if hit is None:
            return None
        stored = json.loads(hit)
        text = stored["text"] if "text" in stored else "".join(stored["deltas"])  # "deltas": older entries
        return text, common_pb2.Usage(**stored["usage"]), stored["finish_reason"]

    async def store(
        self, key: str, text: str, usage: common_pb2.Usage, finish_reason: common_pb2.FinishReason.ValueType
    ) -> None:
        """The answer once, as text, to be replayed in one delta (never per token)."""
        payload = {
            "text": text,
            "usage": {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens},
            "finish_reason": finish_reason,
        }
        await self._cache.set(key, json.dumps(payload).encode(), self._ttl_s)
