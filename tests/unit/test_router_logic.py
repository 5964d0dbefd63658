"""Router logic on fakes: placement, load bound, history compression, planning helpers."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass

from agentmesh.common.v1 import common_pb2
from agentmesh.inference.v1 import inference_pb2
from services.router.planning.grounding import ungrounded
from services.router.planning.prompts import by_similarity, choose_schema, fill_messages, parse_choice
from services.router.replicas.link import _LINK_DOWN, ReplicaLink, _merge
from services.router.replicas.picker import (
    LeastLoadedPicker,
    ReplicaPicker,
    RoundRobinPicker,
    placement_key,
    rendezvous_order,
)
from services.router.turn.prompt import Message, PastTurn, history_messages
from services.runtime.flush import next_tick
from services.tools.builtin import default_tools
from services.tools.convert import spec_to_proto


@dataclass
class FakeReplica:
    target: str
    load: int = 0
    up: bool = True

    @property
    def available(self) -> bool:
        return self.up

    def load_score(self) -> int:
        return self.load


def test_placement_key_is_the_conversation_root() -> None:
    turn1 = [("system", "S"), ("user", "hello")]
    turn2 = [*turn1, ("assistant", "hi"), ("user", "more")]
    other = [("system", "S"), ("user", "different")]
    assert placement_key(turn1) == placement_key(turn2) != placement_key(other)


def test_rendezvous_moves_only_the_keys_of_a_removed_replica() -> None:
    targets = [f"r{i}" for i in range(5)]
    keys = [bytes([i, j]) for i in range(20) for j in range(10)]
    before = {k: rendezvous_order(k, targets)[0] for k in keys}
    after = {k: rendezvous_order(k, targets[:-1])[0] for k in keys}
    moved = [k for k in keys if before[k] != after[k]]
    assert all(before[k] == "r4" for k in moved)
    spread = Counter(before.values())
    assert min(spread.values()) > len(keys) / 5 * 0.6  # roughly even


def test_two_pickers_agree_without_talking() -> None:
    replicas = [FakeReplica(f"r{i}") for i in range(4)]
    a, b = ReplicaPicker(), ReplicaPicker()
    for i in range(50):
        key = placement_key([("system", "S"), ("user", f"session {i}")])
        assert a.candidates(key, replicas)[0].replica is b.candidates(key, replicas)[0].replica


def test_load_bound_spills_to_the_next_replica_in_key_order() -> None:
    replicas = [FakeReplica(f"r{i}") for i in range(4)]
    picker = ReplicaPicker(load_factor=1.25, min_load=4)
    key = b"k"
    preferred = replicas[[r.target for r in replicas].index(picker.candidates(key, replicas)[0].replica.target)]
    assert picker.candidates(key, replicas)[0].reason == "affinity"
    preferred.load = 40  # far above c·(total+1)/n = 1.25·41/4 → 13
    choice = picker.candidates(key, replicas)[0]
    assert choice.replica is not preferred and choice.reason == "load-bound-spill"
    assert choice.replica.target == rendezvous_order(key, [r.target for r in replicas])[1]
    preferred.load = 3  # under min_load: affinity wins even though it is the busiest
    assert picker.candidates(key, replicas)[0].replica is preferred


def test_unavailable_replicas_leave_the_candidate_set() -> None:
    replicas = [FakeReplica(f"r{i}") for i in range(3)]
    picker = ReplicaPicker()
    first = picker.candidates(b"x", replicas)[0].replica
    assert isinstance(first, FakeReplica)
    first.up = False
    choices = picker.candidates(b"x", replicas)
    assert first not in [c.replica for c in choices] and len(choices) == 2
    first.up = True
    assert picker.candidates(b"x", replicas)[0].replica is first  # rejoins where it was


def test_recent_placement_refines_after_a_detour() -> None:
    replicas = [FakeReplica(f"r{i}") for i in range(3)]
    picker = ReplicaPicker(min_load=1)
    key = b"session"
    home = next(r for r in replicas if r is picker.candidates(key, replicas)[0].replica)
    home.load = 10
    detour = picker.candidates(key, replicas)[0].replica
    picker.served(key, detour)
    home.load = 0
    choice = picker.candidates(key, replicas)[0]
    assert choice.replica is detour and choice.reason == "affinity-recent"


def test_baseline_pickers() -> None:
    replicas = [FakeReplica("a", 3), FakeReplica("b", 1), FakeReplica("c", 2)]
    assert [c.replica.target for c in LeastLoadedPicker().candidates(b"", replicas)] == ["b", "c", "a"]
    rr = RoundRobinPicker()
    assert [rr.candidates(b"", replicas)[0].replica.target for _ in range(4)] == ["a", "b", "c", "a"]


def test_history_keeps_recent_turns_within_budget() -> None:
    turns = [PastTurn(f"question {i} " + "x" * 200, f"answer {i} " + "y" * 200) for i in range(10)]
    kept = history_messages(turns, budget_tokens=400)
    assert kept[0] == Message("system", "(7 earlier turns of this conversation omitted.)")
    assert [m[1].split()[1] for m in kept[1:]] == ["7", "7", "8", "8", "9", "9"]
    assert history_messages(turns[:2], budget_tokens=10_000)[0][0] == "user"


def test_plan_helpers() -> None:
    specs = [spec_to_proto(t) for t in default_tools()]
    names = [t.name for t in specs]
    schema = choose_schema(names, "required")
    assert schema["properties"]["tools"]["minItems"] == 1
    assert set(schema["properties"]["tools"]["items"]["enum"]) == set(names)
    assert parse_choice('{"tools": ["calculator", "nope", "calculator"]}', names) == ["calculator"]
    assert parse_choice('{"tools": ["clock"]}', ["calculator"]) == []
    assert parse_choice('{"tools": [', names) == []
    assert ungrounded({"expression": "23*47"}, "What is 23*47?") == []
    assert ungrounded({"value": 10.0, "from_unit": "a"}, "What is my name?") == [10.0]
    examples = [("What is 12*9?", 1), ("What time is it in London?", 2), ("Write a poem.", 3)]
    assert by_similarity("What is 23*47?", examples)[-1][1] == 1
    assert by_similarity("what time is it in Tokyo", examples)[-1][1] == 2


def test_fill_prompt_takes_its_worked_examples_from_the_tool_spec() -> None:
    calculator = next(spec_to_proto(t) for t in default_tools() if t.name == "calculator")
    messages = fill_messages(calculator, "What is 23*47?")
    shots = [m for m in messages[1:-1] if m.role == "assistant"]
    assert shots and all(m.content.startswith("{") for m in shots)
    assert {m.content for m in messages[1:-1] if m.role == "user"} <= {e.text for e in calculator.examples}
    assert messages[-1] == Message("user", "What is 23*47?")
    with_context = fill_messages(calculator, "Now add 6 to that result.", context="12*12 = 144.")
    assert with_context[-1].content == "Earlier: 12*12 = 144.\nNow: Now add 6 to that result."


def test_a_consumer_that_fell_behind_gets_its_queued_deltas_in_one() -> None:
    items: list[object] = [inference_pb2.GenerationDelta(request_id="r", text="Hel", token_count=2)]
    items += [inference_pb2.GenerationDelta(request_id="r", text=t, token_count=1) for t in ("lo", " wor", "ld")]
    last = inference_pb2.GenerationDelta(request_id="r", text="!", token_count=1)
    last.result.finish_reason = common_pb2.FINISH_REASON_STOP
    items += [last, inference_pb2.GenerationDelta(request_id="r", text="never")]  # after the end: not merged
    merged, rest = _merge(items)
    assert (merged.text, merged.token_count, merged.result.finish_reason) == ("Hello world!", 6, 1)
    assert len(rest) == 1
    down = (_LINK_DOWN, "gone")
    merged, rest = _merge([*[inference_pb2.GenerationDelta(request_id="r", text=t) for t in "ab"], down])
    assert merged.text == "ab" and not merged.HasField("result") and rest == [down]


class _Call:
    """The link's Generate call, minus the wire: writes are recorded, nothing is read."""

    def __init__(self) -> None:
        self.written: list[inference_pb2.GenerateRequest] = []

    async def write(self, request: inference_pb2.GenerateRequest) -> None:
        self.written.append(request)


async def test_a_busy_consumer_gets_what_queued_merged_and_the_result_ends_it() -> None:
    link = ReplicaLink("replica", lambda target: None)  # type: ignore[arg-type, return-value]
    call = link._call = _Call()  # type: ignore[assignment]
    link._connected.set()
    writer = asyncio.create_task(link._write_loop(call))  # type: ignore[arg-type]  # what _maintain starts per call
    stream = link.generate(inference_pb2.SubmitGeneration(request_id="r"))

    def frame(text: str, end: bool = False) -> inference_pb2.GenerateResponse:
        delta = inference_pb2.GenerationDelta(request_id="r", text=text, token_count=1)
        if end:
            delta.result.finish_reason = common_pb2.FINISH_REASON_STOP
        return inference_pb2.GenerateResponse(deltas=[delta])

    first = asyncio.ensure_future(anext(stream))
    for _ in range(5):  # let it submit and wait
        await asyncio.sleep(0)
    link.received(frame("Hel"))
    assert (await first).text == "Hel"  # a waiting consumer gets a frame at once
    for text in ("lo", " wor", "ld"):  # while the consumer is busy elsewhere
        link.received(frame(text))
    link.received(frame("!", end=True))
    merged = await anext(stream)
    assert (merged.text, merged.token_count, merged.HasField("result")) == ("lo world!", 4, True)
    assert await anext(stream, None) is None and not link._slots
    assert [r.WhichOneof("action") for r in call.written] == ["submit"]  # finished: no abort sent
    writer.cancel()


def test_flush_ticks_are_shared_by_consumers_that_started_apart() -> None:
    """Holds end on multiples of hold_s at least half a hold away: consumers whose holds began at different
    times end them together (so one engine step wakes them all), and a hold lasts hold_s on average."""
    hold = 0.1
    starts = [100.0 + i * 0.013 for i in range(8)]  # 0 to 91 ms apart
    ends = {round(next_tick(t, hold), 9) for t in starts}
    assert ends == {100.1, 100.2}  # two ticks for starts spread over most of a hold, not eight
    for t in starts:
        assert hold / 2 <= next_tick(t, hold) - t <= 1.5 * hold
    lengths = [next_tick(t / 1000, hold) - t / 1000 for t in range(100_000, 100_100)]
    assert abs(sum(lengths) / len(lengths) - hold) < 0.005
