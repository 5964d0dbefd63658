"""Presence, frequency and repetition penalties: validated where they enter, carried to vLLM, part of the cache key,
and the router's plain-chat default (answers without tool results, and Complete; never answers over tool results)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any, cast

import pytest

from agentmesh.agent.v1 import agent_pb2
from agentmesh.common.v1 import common_pb2
from agentmesh.inference.v1 import inference_pb2
from agentmesh.tools.v1 import tools_pb2
from agentmesh_client import Sampling
from gateway.openai_request import parse_chat_request
from services.inference.convert import request_from_proto
from services.router.replicas.generation import GenerationDone, GenerationEvent, GenerationSpec, Generator
from services.router.replicas.response_cache import ResponseCache
from services.router.serving.servicer import AgentServicer, check_sampling
from services.router.turn.answer import Answerer
from services.router.turn.progress import TurnProgress
from services.router.turn.prompt import Message
from services.router.turn.tool_round import ToolResults
from services.runtime.errors import InvalidArgument

USER = [{"role": "user", "content": "hi"}]


def _submit(**sampling: Any) -> inference_pb2.SubmitGeneration:
    submit = inference_pb2.SubmitGeneration(request_id="r1", text="hello")
    submit.sampling.CopyFrom(common_pb2.SamplingParams(**sampling))
    return submit


def test_the_inference_service_resolves_and_validates_penalties() -> None:
    plain = request_from_proto(_submit(), default_max_tokens=8, max_output_tokens=64).sampling
    assert (plain.presence_penalty, plain.frequency_penalty, plain.repetition_penalty) == (0.0, 0.0, 1.0)
    given = request_from_proto(
        _submit(presence_penalty=0.5, frequency_penalty=-1.5, repetition_penalty=1.15),
        default_max_tokens=8,
        max_output_tokens=64,
    ).sampling
    assert (given.presence_penalty, given.frequency_penalty) == (0.5, -1.5)
    assert given.repetition_penalty == pytest.approx(1.15)
    with pytest.raises(InvalidArgument) as err:
        request_from_proto(
            _submit(presence_penalty=2.5, frequency_penalty=float("nan"), repetition_penalty=0.0),
            default_max_tokens=8,
            max_output_tokens=64,
        )
    assert [v.field for v in err.value.field_violations] == [
        "submit.sampling.presence_penalty",
        "submit.sampling.frequency_penalty",
        "submit.sampling.repetition_penalty",
    ]


def test_vllm_gets_the_penalties() -> None:
    pytest.importorskip("vllm")
    from services.inference.vllm_engine import VllmEngine, VllmSettings

    request = request_from_proto(
        _submit(presence_penalty=0.25, frequency_penalty=0.5, repetition_penalty=1.2),
        default_max_tokens=8,
        max_output_tokens=64,
    )
    params = VllmEngine(VllmSettings(model="unused", model_id="unused"))._sampling_params(request)
    assert (params.presence_penalty, params.frequency_penalty) == (0.25, 0.5)
    assert params.repetition_penalty == pytest.approx(1.2)


def test_the_router_names_the_bad_penalty_field() -> None:
    bad = common_pb2.SamplingParams(presence_penalty=-3, frequency_penalty=2.0, repetition_penalty=-1)
    fields = [v.field for v in check_sampling(bad, "start_turn.sampling", 1024)]
    assert fields == ["start_turn.sampling.presence_penalty", "start_turn.sampling.repetition_penalty"]
    fine = common_pb2.SamplingParams(presence_penalty=-2, frequency_penalty=2, repetition_penalty=1.3)
    assert check_sampling(fine, "sampling", 1024) == []


def test_the_openai_edge_takes_openais_penalties_and_vllms_repetition_penalty() -> None:
    body = {"model": "m", "messages": USER, "presence_penalty": 0.5, "frequency_penalty": -1, "repetition_penalty": 1.1}
    sampling = parse_chat_request(body, {}).sampling
    assert sampling == Sampling(presence_penalty=0.5, frequency_penalty=-1.0, repetition_penalty=1.1)
    proto = sampling.to_proto()
    assert proto.presence_penalty == 0.5 and proto.frequency_penalty == -1.0
    assert proto.repetition_penalty == pytest.approx(1.1)
    assert (
        not parse_chat_request({"model": "m", "messages": USER}, {}).sampling.to_proto().HasField("repetition_penalty")
    )
    for name, value in (("presence_penalty", 2.5), ("frequency_penalty", "1"), ("repetition_penalty", 0)):
        with pytest.raises(InvalidArgument) as err:
            parse_chat_request({"model": "m", "messages": USER, name: value}, {})
        assert err.value.field_violations[0].field == name


def test_penalties_are_part_of_the_response_cache_key() -> None:
    cache = ResponseCache(cast(Any, None), "m", 600.0, None)
    messages = [Message("user", "hi")]

    def key(**sampling: Any) -> str:
        return cache.key(GenerationSpec(messages, common_pb2.SamplingParams(temperature=0, **sampling)))

    keys = {key(), key(repetition_penalty=1.15), key(repetition_penalty=1.2), key(presence_penalty=0.5)}
    assert len(keys) == 4 and key(frequency_penalty=0.5) == key(frequency_penalty=0.5)


class _Recording:
    """A generator that records the spec it was asked for and answers at once."""

    def __init__(self) -> None:
        self.specs: list[GenerationSpec] = []

    async def stream(self, spec: GenerationSpec) -> AsyncGenerator[GenerationEvent, None]:
        self.specs.append(spec)
        yield GenerationEvent(text="ok")
        usage = common_pb2.Usage(prompt_tokens=3, completion_tokens=1)
        yield GenerationEvent(done=GenerationDone(usage, common_pb2.FINISH_REASON_STOP, 0.0, "r", "test"))


async def _answer_sampling(
    penalty: float, start: agent_pb2.StartTurn, tools: ToolResults, history: list[Message] | None = None
) -> common_pb2.SamplingParams:
    recording = _Recording()
    answerer = Answerer(cast(Generator, recording), max_tokens=32, opening=False, repetition_penalty=penalty)
    past = history or []
    async for _ in answerer.stream(start, TurnProgress("t"), system_prompt="Be brief.", history=past, tools=tools):
        pass
    return recording.specs[-1].sampling


async def test_plain_answers_get_the_default_penalty_and_answers_over_tool_results_none() -> None:
    start = agent_pb2.StartTurn(message="Say hi")
    plain = await _answer_sampling(1.15, start, ToolResults())
    assert plain.repetition_penalty == pytest.approx(1.15) and plain.temperature == 0 and plain.max_tokens == 32
    result = tools_pb2.ToolResult(
        call_id="c1", tool_name="calculator", status=common_pb2.TOOL_CALL_STATUS_OK, output_json='{"result": 4}'
    )
    grounded = await _answer_sampling(1.15, start, ToolResults([result], {"c1": '{"expression": "2+2"}'}))
    assert not grounded.HasField("repetition_penalty")
    asked = agent_pb2.StartTurn(message="Say hi", sampling=common_pb2.SamplingParams(repetition_penalty=1.0))
    assert (await _answer_sampling(1.15, asked, ToolResults())).repetition_penalty == 1.0  # the turn's own wins
    assert not (await _answer_sampling(1.0, start, ToolResults())).HasField("repetition_penalty")  # 1: none
    # Over a conversation the answer may need to repeat what was said ("What is the code word?"): none either.
    earlier = [Message("user", "Remember this code word: PINEAPPLE."), Message("assistant", "Got it.")]
    recall = agent_pb2.StartTurn(message="What is the code word?")
    assert not (await _answer_sampling(1.15, recall, ToolResults(), earlier)).HasField("repetition_penalty")


async def test_complete_gets_the_plain_chat_default_unless_it_names_a_penalty() -> None:
    recording = _Recording()
    servicer = AgentServicer(cast(Any, None), cast(Generator, recording), cast(Any, None), repetition_penalty=1.2)
    for sampling in (common_pb2.SamplingParams(), common_pb2.SamplingParams(repetition_penalty=1.05)):
        [e async for e in servicer.complete_events(agent_pb2.CompleteRequest(prompt="Say hi", sampling=sampling))]
    assert [s.sampling.repetition_penalty for s in recording.specs] == pytest.approx([1.2, 1.05])
