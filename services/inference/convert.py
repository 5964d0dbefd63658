"""Proto ↔ domain conversion for the inference service, with contract-level validation.

Field paths in errors are the proto paths the caller wrote
(``submit.sampling.max_tokens``), so a client can point at its own mistake.
Model-specific checks (prompt length in tokens) happen in ``Engine.prepare``.
"""

from __future__ import annotations

import json
import math
import time

import jsonschema

from agentmesh.common.v1 import common_pb2
from agentmesh.inference.v1 import inference_pb2
from services.inference.engine import (
    ChatTurn,
    FinishReason,
    GenerationRequest,
    Load,
    ModelInfo,
    Sampling,
    Usage,
)
from services.runtime.errors import FieldViolation, InvalidArgument
from services.runtime.protoutil import timestamp

MAX_REQUEST_ID_LEN = 128
MAX_CACHE_SALT_LEN = 128
#: The longest flush interval a submit may ask for (a hold never delays a request's first text or its end).
MAX_FLUSH_S = 60.0
ROLES = {
    common_pb2.ROLE_SYSTEM: "system",
    common_pb2.ROLE_USER: "user",
    common_pb2.ROLE_ASSISTANT: "assistant",
    common_pb2.ROLE_TOOL: "tool",
}
PRIORITIES = {
    common_pb2.PRIORITY_UNSPECIFIED: 1,
    common_pb2.PRIORITY_P0: 0,
    common_pb2.PRIORITY_P1: 1,
    common_pb2.PRIORITY_P2: 2,
}
FINISH_REASONS = {
    FinishReason.STOP: common_pb2.FINISH_REASON_STOP,
    FinishReason.LENGTH: common_pb2.FINISH_REASON_LENGTH,
    FinishReason.ABORTED: common_pb2.FINISH_REASON_ABORTED,
    FinishReason.ERROR: common_pb2.FINISH_REASON_ERROR,
}


def request_from_proto(
    submit: inference_pb2.SubmitGeneration, *, default_max_tokens: int, max_output_tokens: int
) -> GenerationRequest:
    """Validate ``submit`` and build the engine's request; InvalidArgument lists every bad field."""
    bad: list[FieldViolation] = []
    if not submit.request_id:
        bad.append(FieldViolation("submit.request_id", "must not be empty"))
    elif len(submit.request_id) > MAX_REQUEST_ID_LEN:
        bad.append(FieldViolation("submit.request_id", f"must be at most {MAX_REQUEST_ID_LEN} characters"))

    prompt: str | tuple[ChatTurn, ...] = ""
    kind = submit.WhichOneof("prompt")
    if kind == "text":
        if not submit.text.strip():
            bad.append(FieldViolation("submit.text", "must not be empty"))
        prompt = submit.text
    elif kind == "chat":
        turns: list[ChatTurn] = []
        if not submit.chat.messages:
            bad.append(FieldViolation("submit.chat.messages", "must not be empty"))
        for i, message in enumerate(submit.chat.messages):
            role = ROLES.get(message.role)
            if role is None:
                bad.append(FieldViolation(f"submit.chat.messages[{i}].role", "must be set"))
                continue
            turns.append(ChatTurn(role=role, content=message.content, tool_name=message.tool_name))
        if submit.chat.messages and not any(m.content.strip() for m in submit.chat.messages):
            bad.append(FieldViolation("submit.chat.messages", "every message is empty"))
        if submit.chat.continue_final_message and (
            not submit.chat.messages or submit.chat.messages[-1].role != common_pb2.ROLE_ASSISTANT
        ):
            bad.append(FieldViolation("submit.chat.continue_final_message", "the last message must be ROLE_ASSISTANT"))
        prompt = tuple(turns)
    else:
        bad.append(FieldViolation("submit.prompt", "set text or chat"))

    s = submit.sampling
    temperature = s.temperature if s.HasField("temperature") else 1.0
    if not math.isfinite(temperature) or temperature < 0 or temperature > 2:
        bad.append(FieldViolation("submit.sampling.temperature", "must be between 0 and 2"))
    top_p = s.top_p if s.HasField("top_p") else 1.0
    if not math.isfinite(top_p) or not 0 < top_p <= 1:
        bad.append(FieldViolation("submit.sampling.top_p", "must be in (0, 1]"))
    max_tokens = s.max_tokens if s.HasField("max_tokens") else default_max_tokens
    if max_tokens < 1:
        bad.append(FieldViolation("submit.sampling.max_tokens", "must be at least 1"))
    elif max_tokens > max_output_tokens:
        bad.append(FieldViolation("submit.sampling.max_tokens", f"must be at most {max_output_tokens}"))
    if len(s.stop) > 8 or any(not stop for stop in s.stop):
        bad.append(FieldViolation("submit.sampling.stop", "at most 8 non-empty strings"))
    presence = s.presence_penalty if s.HasField("presence_penalty") else 0.0
    frequency = s.frequency_penalty if s.HasField("frequency_penalty") else 0.0
    for name, value in (("presence_penalty", presence), ("frequency_penalty", frequency)):
        if not -2 <= value <= 2:  # False for NaN too
            bad.append(FieldViolation(f"submit.sampling.{name}", "must be between -2 and 2"))
    repetition = s.repetition_penalty if s.HasField("repetition_penalty") else 1.0
    if not (math.isfinite(repetition) and repetition > 0):
        bad.append(FieldViolation("submit.sampling.repetition_penalty", "must be greater than 0 (1: no penalty)"))

    schema_text: str | None = None
    if submit.structured_output.json_schema:
        schema_text = submit.structured_output.json_schema
        try:
            schema = json.loads(schema_text)
            jsonschema.Draft202012Validator.check_schema(schema)
            if not isinstance(schema, dict):
                raise ValueError("a schema must be a JSON object")
        except (ValueError, jsonschema.SchemaError) as exc:
            reason = exc.message if isinstance(exc, jsonschema.SchemaError) else str(exc)
            bad.append(FieldViolation("submit.structured_output.json_schema", f"not a valid JSON schema: {reason}"))

    if submit.priority not in PRIORITIES:
        bad.append(FieldViolation("submit.priority", "unknown priority"))
    if submit.HasField("timeout") and submit.timeout.ToNanoseconds() <= 0:
        bad.append(FieldViolation("submit.timeout", "must be positive"))
    if submit.HasField("flush_interval") and not 0 <= submit.flush_interval.ToNanoseconds() <= MAX_FLUSH_S * 1e9:
        bad.append(FieldViolation("submit.flush_interval", f"must be between 0 and {MAX_FLUSH_S:g} s"))
    if len(submit.cache_salt) > MAX_CACHE_SALT_LEN:
        bad.append(FieldViolation("submit.cache_salt", f"must be at most {MAX_CACHE_SALT_LEN} characters"))

    continuation: str | None = None
    if submit.HasField("scoring"):
        continuation = submit.scoring.continuation
        if not continuation.strip():
            bad.append(FieldViolation("submit.scoring.continuation", "must not be empty"))
        if submit.HasField("sampling"):
            bad.append(FieldViolation("submit.sampling", "must be unset when scoring (nothing is generated)"))
        if schema_text is not None:
            bad.append(FieldViolation("submit.structured_output", "must be unset when scoring (nothing is generated)"))

    if bad:
        raise InvalidArgument("; ".join(f"{v.field}: {v.description}" for v in bad), bad)
    return GenerationRequest(
        request_id=submit.request_id,
        prompt=prompt,
        sampling=Sampling(
            temperature=temperature,
            top_p=top_p,
            top_k=s.top_k,
            max_tokens=max_tokens,
            seed=s.seed if s.HasField("seed") else None,
            stop=tuple(s.stop),
            presence_penalty=presence,
            frequency_penalty=frequency,
            repetition_penalty=repetition,
        ),
        priority=PRIORITIES[submit.priority],
        json_schema=schema_text,
        add_generation_prompt=submit.chat.add_generation_prompt if kind == "chat" else False,
        continue_final_message=submit.chat.continue_final_message if kind == "chat" else False,
        cache_salt=submit.cache_salt,
        continuation=continuation,
    )


def usage_to_proto(usage: Usage) -> common_pb2.Usage:
    return common_pb2.Usage(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cached_prompt_tokens=usage.cached_prompt_tokens,
    )


def load_to_proto(load: Load, replica_id: str, *, draining: bool) -> inference_pb2.LoadReport:
    observed = timestamp(time.time())
    return inference_pb2.LoadReport(
        replica_id=replica_id,
        running=load.running,
        waiting=load.waiting,
        kv_cache_usage=load.kv_cache_usage,
        prefix_cache_hit_rate=load.prefix_cache_hit_rate,
        max_running=load.max_running,
        draining=draining,
        observed_at=observed,
    )


def model_info_to_proto(info: ModelInfo, replica_id: str) -> inference_pb2.GetModelInfoResponse:
    return inference_pb2.GetModelInfoResponse(
        model_id=info.model_id,
        engine=info.engine,
        engine_version=info.engine_version,
        max_model_len=info.max_model_len,
        max_output_tokens=info.max_output_tokens,
        kv_block_size=info.kv_block_size,
        supports_structured_output=info.supports_structured_output,
        replica_id=replica_id,
    )
