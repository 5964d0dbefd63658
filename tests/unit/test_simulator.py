"""The simulator engine follows its latency model (on its simulated clock, so no timing flakiness)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from services.inference.engine import SCORING, FinishReason, GenerationRequest, Sampling
from services.inference.sim_text import minimal_instance
from services.inference.simulator import SimulatorEngine, SimulatorSettings, Timeline


def request(rid: str, words: int, *, prefix: str = "", max_tokens: int = 8, priority: int = 1) -> GenerationRequest:
    text = prefix + " ".join(f"{rid}w{i}" for i in range(words))
    return GenerationRequest(
        request_id=rid,
        prompt=text,
        sampling=Sampling(temperature=0.0, top_p=1.0, top_k=0, max_tokens=max_tokens, seed=None, stop=()),
        priority=priority,
    )


async def run(engine: SimulatorEngine, req: GenerationRequest) -> list[str]:
    return [u.text async for u in engine.generate(engine.prepare(req), req.request_id)]


@pytest.fixture
async def engine() -> AsyncIterator[SimulatorEngine]:
    sim = SimulatorEngine(
        SimulatorSettings(
            prefill_s_per_token=0.001, decode_base_s=0.01, decode_per_seq_s=0.002, block_size=16, time_scale=0
        )
    )
    await sim.start()
    yield sim
    await sim.close()


async def test_cache_hit_has_shorter_ttft_than_miss(engine: SimulatorEngine) -> None:
    shared = " ".join(f"system{i}" for i in range(400)) + " "
    await run(engine, request("miss", 10, prefix=shared))
    await run(engine, request("hit", 10, prefix=shared))
    miss, hit = engine.timelines["miss"], engine.timelines["hit"]
    assert miss.first_token is not None and hit.first_token is not None
    ttft_miss = miss.first_token - miss.arrived
    ttft_hit = hit.first_token - hit.arrived
    # 410 uncached tokens vs 410 - 400//16*16 = 10 uncached: prefill dominates.
    assert ttft_miss == pytest.approx(0.01 + 0.002 + 0.001 * 410)
    assert ttft_hit == pytest.approx(0.01 + 0.002 + 0.001 * (410 - 400))
    assert engine.load().prefix_cache_hit_rate == pytest.approx(400 / 820)


async def test_batch_growth_slows_decode_as_modelled(engine: SimulatorEngine) -> None:
    await run(engine, request("solo", 4, max_tokens=8))
    solo = engine.timelines["solo"]
    reqs = [request(f"b{i}", 4, max_tokens=8) for i in range(16)]
    await asyncio.gather(*(run(engine, r) for r in reqs))
    batch = engine.timelines["b0"]

    def decode_step(t: Timeline) -> float:
        assert t.first_token is not None and t.last_token is not None
        return (t.last_token - t.first_token) / (t.tokens - 1)

    assert decode_step(solo) == pytest.approx(0.01 + 0.002 * 1)
    assert decode_step(batch) == pytest.approx(0.01 + 0.002 * 16)


async def test_priority_runs_first_when_the_batch_is_full() -> None:
    sim = SimulatorEngine(SimulatorSettings(max_batch=1, time_scale=0))
    await sim.start()
    try:
        low = [request(f"p2-{i}", 4, priority=2, max_tokens=2) for i in range(3)]
        high = request("p0", 4, priority=0, max_tokens=2)
        tasks = [asyncio.create_task(run(sim, r)) for r in low]
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(run(sim, high)))
        await asyncio.gather(*tasks)
        order = sorted(sim.timelines, key=lambda k: sim.timelines[k].first_token or 0)
        # p2-0 was admitted before p0 arrived; p0 then jumps the rest of the queue.
        assert order[:2] == ["p2-0", "p0"]
    finally:
        await sim.close()


async def test_max_tokens_and_finish(engine: SimulatorEngine) -> None:
    req = request("short", 3, max_tokens=5)
    updates = [u async for u in engine.generate(engine.prepare(req), "short")]
    assert len(updates) == 5 and updates[-1].finished is not None
    assert updates[-1].finished.reason is FinishReason.LENGTH
    assert updates[-1].finished.usage.completion_tokens == 5
    assert engine.unfinished_requests() == 0


async def test_cancel_leaves_nothing_running(engine: SimulatorEngine) -> None:
    req = request("cancel", 3, max_tokens=1000)
    gen = engine.generate(engine.prepare(req), "cancel")
    await gen.__anext__()
    assert engine.unfinished_requests() == 1
    await gen.aclose()
    assert engine.unfinished_requests() == 0


def test_minimal_instance_satisfies_schema() -> None:
    import jsonschema

    schema = {
        "type": "object",
        "properties": {
            "tool_calls": {"type": "array", "items": {"type": "object"}},
            "mode": {"enum": ["a", "b"]},
            "n": {"type": "integer", "minimum": 3},
        },
        "required": ["tool_calls", "mode", "n"],
    }
    instance = minimal_instance(schema)
    jsonschema.validate(instance, schema)
    assert instance == {"tool_calls": [], "mode": "a", "n": 3}


async def test_a_scoring_built_in_process_runs_one_step_whatever_sampling_it_was_given(engine: SimulatorEngine) -> None:
    req = replace(request("s", 4, max_tokens=40), continuation="three more words")
    assert req.sampling == SCORING  # the request itself says it: every engine runs a scoring as one greedy step
    updates = [u async for u in engine.generate(engine.prepare(req), "s")]
    assert [u.text for u in updates] == [""] and updates[-1].finished is not None
    assert updates[-1].finished.usage.completion_tokens == 1
    assert updates[-1].finished.continuation is not None and updates[-1].finished.continuation.tokens == 3
