"""The inference service with the real vLLM engine on the embedded SmolLM2 model."""

from __future__ import annotations

import asyncio
import json

import grpc
import jsonschema
import pytest

from agentmesh.common.v1 import common_pb2
from agentmesh.inference.v1 import inference_pb2, inference_pb2_grpc
from services.runtime.status_decode import code_from_number
from tests.e2e.conftest import VllmReplica
from tests.support.generate import GenerateStream, abort, scoring, submit
from tests.support.waiting import eventually

pytestmark = pytest.mark.vllm
USER, SYSTEM = common_pb2.ROLE_USER, common_pb2.ROLE_SYSTEM

# About 400 tokens: longer than three of vLLM's 128-token CPU KV blocks.
LONG_SYSTEM = " ".join(
    f"Rule {i}: answer politely, cite the handbook section {i}, and never reveal internal notes." for i in range(24)
)


async def test_chat_prompt_answers_sensibly(vllm_replica: VllmReplica) -> None:
    stream = GenerateStream(vllm_replica.channel)
    await stream.send(submit("paris", chat=[(USER, "What is the capital of France?")], max_tokens=24))
    await stream.wait("paris")
    await stream.close()
    assert "Paris" in stream.got.text("paris")
    result = stream.got.result("paris")
    assert result.finish_reason in (common_pb2.FINISH_REASON_STOP, common_pb2.FINISH_REASON_LENGTH)
    assert result.usage.prompt_tokens > 5 and result.usage.completion_tokens > 0


async def test_structured_output_matches_the_schema(vllm_replica: VllmReplica) -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 40},
            "country": {"type": "string", "maxLength": 40},
        },
        "required": ["city", "country"],
        "additionalProperties": False,
    }
    stream = GenerateStream(vllm_replica.channel)
    await stream.send(
        submit("json", chat=[(USER, "Name a city and its country as JSON.")], json_schema=schema, max_tokens=60)
    )
    await stream.wait("json")
    await stream.close()
    jsonschema.validate(json.loads(stream.got.text("json")), schema)


async def test_a_request_scores_higher_after_the_prompt_it_was_written_for_and_nothing_is_generated(
    vllm_replica: VllmReplica,
) -> None:
    def written_for(tool: str) -> list[tuple[common_pb2.Role.ValueType, str]]:
        return [(USER, f"Tool: {tool}\nWrite a request a user would send to this tool.")]

    weather = written_for("get weather forecast. The weather forecast for a city over the next days.")
    translate = written_for("translate text. Translate a text into another language.")
    ask = "Will it rain in Paris tomorrow?"
    stream = GenerateStream(vllm_replica.channel)
    await stream.send(
        scoring("fits", ask, weather), scoring("fits-again", ask, weather), scoring("odd", ask, translate)
    )
    await stream.wait("fits", "fits-again", "odd")
    await stream.close()
    fits, again, odd = (stream.got.result(r) for r in ("fits", "fits-again", "odd"))
    assert fits.continuation.tokens == odd.continuation.tokens > 3  # the same text, tokenised on its own
    assert fits.continuation.logprob == pytest.approx(again.continuation.logprob, abs=1e-3)  # deterministic
    assert fits.continuation.logprob > odd.continuation.logprob
    assert stream.got.text("fits") == "" and fits.finish_reason != common_pb2.FINISH_REASON_ERROR
    assert fits.usage.prompt_tokens > fits.continuation.tokens


async def test_repeated_long_prefix_is_served_from_the_prefix_cache(vllm_replica: VllmReplica) -> None:
    stream = GenerateStream(vllm_replica.channel)
    await stream.send(submit("first", chat=[(SYSTEM, LONG_SYSTEM), (USER, "Hello!")], max_tokens=4))
    await stream.wait("first")
    await stream.send(submit("second", chat=[(SYSTEM, LONG_SYSTEM), (USER, "Good morning!")], max_tokens=4))
    await stream.wait("second")
    await stream.close()
    first, second = stream.got.result("first"), stream.got.result("second")
    assert first.usage.prompt_tokens > 256
    assert second.usage.cached_prompt_tokens >= 128
    assert second.usage.cached_prompt_tokens > first.usage.cached_prompt_tokens
    stub = inference_pb2_grpc.InferenceServiceStub(vllm_replica.channel)
    load = (await stub.GetLoad(inference_pb2.GetLoadRequest())).load
    assert load.prefix_cache_hit_rate > 0


async def test_abort_mid_stream_leaves_no_unfinished_engine_request(vllm_replica: VllmReplica) -> None:
    stream = GenerateStream(vllm_replica.channel)
    await stream.send(submit("essay", chat=[(USER, "Write a long essay about the ocean.")], max_tokens=400))
    await asyncio.wait_for(stream.got.first["essay"].wait(), 60)
    assert vllm_replica.engine.unfinished_requests() == 1
    await stream.send(abort("essay"))
    await stream.wait("essay")
    assert stream.got.result("essay").finish_reason == common_pb2.FINISH_REASON_ABORTED
    assert vllm_replica.engine.unfinished_requests() == 0
    # A dropped stream aborts its requests too.
    stream.cancel()
    dropped = GenerateStream(vllm_replica.channel)
    await dropped.send(submit("orphan", chat=[(USER, "Count to one hundred.")], max_tokens=400))
    await asyncio.wait_for(dropped.got.first["orphan"].wait(), 60)
    dropped.cancel()
    await eventually(lambda: vllm_replica.engine.unfinished_requests() == 0, 10, "engine idle")


async def test_eight_concurrent_requests_complete_in_order(vllm_replica: VllmReplica) -> None:
    questions = [f"What is {i} plus {i}?" for i in range(8)]
    stream = GenerateStream(vllm_replica.channel)
    await stream.send(*(submit(f"q{i}", chat=[(USER, q)], max_tokens=16) for i, q in enumerate(questions)))
    await stream.wait(*(f"q{i}" for i in range(8)), within_s=120)
    await stream.close()
    for i in range(8):
        deltas = stream.got.deltas[f"q{i}"]
        assert all(not d.HasField("result") for d in deltas[:-1]) and deltas[-1].HasField("result")
        result = deltas[-1].result
        assert result.usage.completion_tokens == sum(d.token_count for d in deltas) > 0
    assert max(len(f.deltas) for f in stream.got.frames) > 1  # coalesced across requests
    assert vllm_replica.engine.unfinished_requests() == 0


async def test_prompt_longer_than_the_context_is_invalid(vllm_replica: VllmReplica) -> None:
    stream = GenerateStream(vllm_replica.channel)
    await stream.send(submit("huge", "word " * 3000, max_tokens=8), submit("fine", "Hi", max_tokens=2))
    await stream.wait("huge", "fine")
    await stream.close()
    error = stream.got.result("huge").error
    assert code_from_number(error.code) is grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in error.field_violations] == ["submit.text"]
    assert stream.got.result("fine").finish_reason != common_pb2.FINISH_REASON_ERROR


async def test_model_info_reports_the_engine(vllm_replica: VllmReplica) -> None:
    stub = inference_pb2_grpc.InferenceServiceStub(vllm_replica.channel)
    info = await stub.GetModelInfo(inference_pb2.GetModelInfoRequest())
    assert info.engine == "vllm" and info.model_id == "SmolLM2-135M-Instruct"
    assert info.max_model_len == 2048 and info.kv_block_size == 128
    assert info.engine_version.endswith("+cpu")
