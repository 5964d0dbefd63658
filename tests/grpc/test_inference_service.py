"""The inference service on a real grpc.aio server, with the simulator engine (engine-agnostic paths)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import grpc
import grpc.aio
import jsonschema
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentmesh.common.v1 import common_pb2
from agentmesh.inference.v1 import inference_pb2, inference_pb2_grpc
from services.inference.build import watch_engine
from services.inference.metrics import InferenceMetrics
from services.inference.servicer import InferenceServicer
from services.inference.session import SessionSettings
from services.inference.simulator import SimulatorEngine, SimulatorSettings
from services.runtime.metrics import Metrics
from services.runtime.server import MeshServer
from services.runtime.status_decode import code_from_number
from tests.conftest import StartServer
from tests.support.generate import GenerateStream, abort, scoring, submit
from tests.support.waiting import eventually

OpenChannel = Callable[..., grpc.aio.Channel]
USER = common_pb2.ROLE_USER


@dataclass
class Replica:
    engine: SimulatorEngine
    server: MeshServer
    channel: grpc.aio.Channel
    metrics: Metrics


@pytest.fixture
async def replica(start_server: StartServer, open_channel: OpenChannel) -> AsyncIterator[Replica]:
    engine = SimulatorEngine(
        SimulatorSettings(
            decode_base_s=0.005,
            decode_per_seq_s=0.0,
            max_model_len=512,
            output_tokens=100,
            max_output_tokens=128,
        )
    )
    await engine.start()
    metrics = Metrics()
    servicer = InferenceServicer(
        engine,
        SessionSettings(replica_id="sim-0", default_max_tokens=16, load_interval_s=0.2),
        InferenceMetrics(metrics, engine.load),
    )
    server = await start_server([servicer.service()], metrics=metrics)
    yield Replica(engine, server, open_channel(server.address), metrics)
    await engine.close()


async def test_token_ids_travel_only_when_asked_for(replica: Replica) -> None:
    stream = GenerateStream(replica.channel)
    with_ids = submit("ids", "prompt with ids", max_tokens=8)
    with_ids.submit.return_token_ids = True
    await stream.send(with_ids, submit("counts", "prompt with counts only", max_tokens=8))
    await stream.wait("ids", "counts")
    await stream.close()
    ids, counts = stream.got.deltas["ids"], stream.got.deltas["counts"]
    assert sum(len(d.token_ids) for d in ids) == sum(d.token_count for d in ids) == 8
    assert sum(len(d.token_ids) for d in counts) == 0 and sum(d.token_count for d in counts) == 8


async def test_eight_concurrent_requests_on_one_stream_complete_in_order(replica: Replica) -> None:
    stream = GenerateStream(replica.channel)
    ids = [f"r{i}" for i in range(8)]
    await stream.send(*(submit(r, f"prompt number {r}", max_tokens=12) for r in ids))
    await stream.wait(*ids)
    await stream.close()
    for rid in ids:
        deltas = stream.got.deltas[rid]
        assert [d.HasField("result") for d in deltas] == [False] * (len(deltas) - 1) + [True]
        result = stream.got.result(rid)
        assert result.finish_reason == common_pb2.FINISH_REASON_LENGTH
        assert result.usage.completion_tokens == 12 == sum(d.token_count for d in deltas)
        assert result.usage.prompt_tokens == 3
        assert result.HasField("time_to_first_token")
    # Deltas of requests advancing in the same engine step share a frame.
    total_deltas = sum(len(f.deltas) for f in stream.got.frames)
    assert total_deltas >= 8 * 12 // 12  # sanity
    assert max(len(f.deltas) for f in stream.got.frames) == 8
    assert len(stream.got.frames) < total_deltas
    assert replica.engine.unfinished_requests() == 0


async def test_held_requests_get_their_first_text_and_end_at_once_the_rest_on_shared_ticks(
    replica: Replica,
) -> None:
    """100 tokens at 5 ms a token, held to 100 ms: about 6 deliveries each instead of 100, the same text as
    unheld, and the held requests' text in the same frames (their ticks are shared)."""
    stream = GenerateStream(replica.channel)
    held = [submit(f"h{i}", "hello there", max_tokens=100) for i in range(4)]
    for message in held:
        message.submit.flush_interval.FromMilliseconds(100)
    await stream.send(submit("plain", "hello there", max_tokens=100), *held)
    await stream.wait("plain", *(f"h{i}" for i in range(4)))
    await stream.close()
    for i in range(4):
        deltas = stream.got.deltas[f"h{i}"]
        assert stream.got.text(f"h{i}") == stream.got.text("plain") != ""
        assert deltas[0].token_count == 1  # the first text at once
        assert sum(d.token_count for d in deltas) == 100 and deltas[-1].HasField("result")
        assert len(deltas) <= 12, len(deltas)  # 0.5 s of decode: about 6 ticks, not 100 steps
    assert len(stream.got.deltas["plain"]) > 50  # unheld: about a delta per engine step
    sharing = [f for f in stream.got.frames if sum(d.request_id.startswith("h") for d in f.deltas) > 1]
    assert len(sharing) >= 3  # the held requests' ticks went out together


async def test_same_request_gives_same_text_alone_or_multiplexed(replica: Replica) -> None:
    stream = GenerateStream(replica.channel)
    await stream.send(submit("alone", "hello there", max_tokens=10))
    await stream.wait("alone")
    await stream.send(*(submit(f"m{i}", "hello there" if i == 3 else f"other {i}", max_tokens=10) for i in range(6)))
    await stream.wait(*(f"m{i}" for i in range(6)))
    await stream.close()
    assert stream.got.text("alone") == stream.got.text("m3") != ""


async def test_abort_mid_stream_leaves_nothing_running(replica: Replica) -> None:
    stream = GenerateStream(replica.channel)
    await stream.send(submit("long", "go on", max_tokens=120), submit("short", "be brief", max_tokens=5))
    await asyncio.wait_for(stream.got.first["long"].wait(), 10)
    await stream.send(abort("long"), abort("no-such-request"))
    await stream.wait("long", "short")
    result = stream.got.result("long")
    assert result.finish_reason == common_pb2.FINISH_REASON_ABORTED
    assert not result.HasField("error")
    assert stream.got.result("short").finish_reason == common_pb2.FINISH_REASON_LENGTH
    assert replica.engine.unfinished_requests() == 0
    # The stream survives the abort and the unknown id.
    await stream.send(submit("after", "still here", max_tokens=3))
    await stream.wait("after")
    await stream.close()


async def test_disconnect_aborts_every_request(replica: Replica) -> None:
    stream = GenerateStream(replica.channel)
    await stream.send(*(submit(f"d{i}", "keep going", max_tokens=120) for i in range(4)))
    await asyncio.wait_for(stream.got.first["d3"].wait(), 10)
    assert replica.engine.unfinished_requests() == 4
    stream.cancel()
    await eventually(lambda: replica.engine.unfinished_requests() == 0, 5, "engine idle")


async def test_expired_request_deadline_aborts_only_that_request(replica: Replica) -> None:
    stream = GenerateStream(replica.channel)
    await stream.send(
        submit("slow", "take your time", max_tokens=120, timeout_s=0.1), submit("ok", "quick", max_tokens=4)
    )
    await stream.wait("slow", "ok")
    slow = stream.got.result("slow")
    assert slow.finish_reason == common_pb2.FINISH_REASON_ABORTED
    assert code_from_number(slow.error.code) is grpc.StatusCode.DEADLINE_EXCEEDED
    assert 0 < slow.usage.completion_tokens < 120
    assert stream.got.result("ok").finish_reason == common_pb2.FINISH_REASON_LENGTH
    assert replica.engine.unfinished_requests() == 0
    await stream.close()


def _flushing(message: inference_pb2.GenerateRequest, ms: int) -> inference_pb2.GenerateRequest:
    message.submit.flush_interval.FromMilliseconds(ms)
    return message


def _sampled(message: inference_pb2.GenerateRequest) -> inference_pb2.GenerateRequest:
    message.submit.sampling.max_tokens = 4
    return message


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (submit("e1", "   "), "submit.text"),
        (submit("e2", " ".join(["word"] * 600)), "submit.text"),
        (submit("e3", "fine", max_tokens=129), "submit.sampling.max_tokens"),
        (submit("e4", " ".join(["word"] * 500), max_tokens=100), "submit.sampling.max_tokens"),
        (submit("e5", "fine", json_schema="{not json"), "submit.structured_output.json_schema"),
        (submit("e6", "fine", json_schema={"type": "no-such-type"}), "submit.structured_output.json_schema"),
        (submit("e7", "fine", temperature=-1), "submit.sampling.temperature"),
        (submit("", "fine"), "submit.request_id"),
        (
            inference_pb2.GenerateRequest(submit=inference_pb2.SubmitGeneration(request_id="e9")),
            "submit.prompt",
        ),
        (submit("e10", chat=[(common_pb2.ROLE_UNSPECIFIED, "hi")]), "submit.chat.messages[0].role"),
        (_flushing(submit("e11", "fine"), 61_000), "submit.flush_interval"),
        (_flushing(submit("e12", "fine"), -5), "submit.flush_interval"),
        (scoring("e13", "  ", [(common_pb2.ROLE_USER, "hi")]), "submit.scoring.continuation"),
        (_sampled(scoring("e14", "a request", [(common_pb2.ROLE_USER, "hi")])), "submit.sampling"),
    ],
)
async def test_bad_input_is_a_per_request_invalid_argument(
    replica: Replica, message: inference_pb2.GenerateRequest, field: str
) -> None:
    stream = GenerateStream(replica.channel)
    rid = message.submit.request_id
    await stream.send(message, submit("good", "a fine prompt", max_tokens=3))
    await stream.wait(rid, "good")
    result = stream.got.result(rid)
    assert result.finish_reason == common_pb2.FINISH_REASON_ERROR
    assert code_from_number(result.error.code) is grpc.StatusCode.INVALID_ARGUMENT
    assert field in [v.field for v in result.error.field_violations], result.error
    assert stream.got.result("good").finish_reason == common_pb2.FINISH_REASON_LENGTH
    await stream.close()
    assert await stream.call.code() == grpc.StatusCode.OK


async def test_duplicate_live_request_id_is_rejected(replica: Replica) -> None:
    stream = GenerateStream(replica.channel)
    await stream.send(submit("dup", "first one", max_tokens=60))
    await asyncio.wait_for(stream.got.first["dup"].wait(), 10)
    await stream.send(submit("dup", "second one", max_tokens=3))
    await eventually(lambda: any(d.HasField("result") for d in stream.got.deltas["dup"]), 5, "dup rejected")
    first_final = next(d for d in stream.got.deltas["dup"] if d.HasField("result"))
    assert [v.field for v in first_final.result.error.field_violations] == ["submit.request_id"]
    stream.cancel()


async def test_structured_output_is_valid_json(replica: Replica) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
        "required": ["city", "population"],
    }
    stream = GenerateStream(replica.channel)
    await stream.send(submit("json", "describe a city", json_schema=schema, max_tokens=64))
    await stream.wait("json")
    await stream.close()
    jsonschema.validate(json.loads(stream.got.text("json")), schema)


async def test_a_scoring_sends_no_text_and_reports_its_continuation(replica: Replica) -> None:
    stream = GenerateStream(replica.channel)
    await stream.send(scoring("score", "three words here", [(common_pb2.ROLE_USER, "say something")]))
    await stream.wait("score")
    await stream.close()
    result = stream.got.result("score")
    assert stream.got.text("score") == "" and result.finish_reason != common_pb2.FINISH_REASON_ERROR
    assert result.continuation.tokens == 3 and result.continuation.logprob == 0.0  # the simulator has no model


async def test_load_reports_ride_on_the_stream_and_get_load(replica: Replica) -> None:
    stream = GenerateStream(replica.channel)
    await stream.send(*(submit(f"l{i}", "load me", max_tokens=100) for i in range(3)))
    await asyncio.wait_for(stream.got.first["l2"].wait(), 10)
    await asyncio.sleep(0.25)  # at least one periodic report while busy
    stub = inference_pb2_grpc.InferenceServiceStub(replica.channel)
    load = (await stub.GetLoad(inference_pb2.GetLoadRequest())).load
    assert load.replica_id == "sim-0" and load.running == 3 and load.max_running == 32
    stream.cancel()
    loads = stream.got.loads()
    assert loads[0] == stream.got.frames[0].load  # the first frame reports load
    assert any(report.running == 3 for report in loads)
    info = await stub.GetModelInfo(inference_pb2.GetModelInfoRequest())
    assert info.engine == "simulator" and info.max_model_len == 512 and info.max_output_tokens == 128


async def test_engine_death_fails_requests_unavailable_and_flips_health(replica: Replica) -> None:
    stream = GenerateStream(replica.channel)
    await stream.send(submit("victim", "doomed", max_tokens=120))
    await asyncio.wait_for(stream.got.first["victim"].wait(), 10)
    watchdog = asyncio.create_task(watch_engine(replica.engine, replica.server, interval_s=0.01))
    replica.engine.kill()
    await stream.wait("victim")
    assert code_from_number(stream.got.result("victim").error.code) is grpc.StatusCode.UNAVAILABLE
    await asyncio.wait_for(watchdog, 5)
    health = health_pb2_grpc.HealthStub(replica.channel)
    status = (await health.Check(health_pb2.HealthCheckRequest())).status
    assert status == health_pb2.HealthCheckResponse.NOT_SERVING
    await stream.send(submit("late", "anyone?", max_tokens=3))
    await stream.wait("late")
    assert code_from_number(stream.got.result("late").error.code) is grpc.StatusCode.UNAVAILABLE
    stream.cancel()


async def test_metrics_record_ttft_tokens_and_queue(replica: Replica) -> None:
    stream = GenerateStream(replica.channel)
    await stream.send(submit("m", "measure me", max_tokens=10))
    await stream.wait("m")
    await stream.close()
    reg = replica.metrics.registry
    assert reg.get_sample_value("agentmesh_inference_time_to_first_token_seconds_count") == 1
    assert reg.get_sample_value("agentmesh_inference_inter_token_latency_seconds_count") == 9
    assert reg.get_sample_value("agentmesh_inference_completion_tokens_total") == 10
    assert reg.get_sample_value("agentmesh_inference_requests_total", {"finish_reason": "length"}) == 1
    assert reg.get_sample_value("agentmesh_inference_queue_depth") == 0
    assert reg.get_sample_value("agentmesh_inference_prefix_cache_hit_ratio") is not None
