"""The pure half of the benchmark against vLLM's gRPC server: prompts, round order, output checks, ratios, tables.

Nothing here starts a process or opens a channel (``engine_servers`` and
``engine_clients`` do), so all of it is unit-tested.

- A ``Prompt`` is one request as both sides see it: the same chat messages, and
  the token ids the model's chat template makes of them (what vLLM's server
  is sent, so its prompt tokens are ours token for token).
- Rounds alternate their order (ours, vLLM; then vLLM, ours; …) so a drift in
  the machine's speed over the run weighs on both sides alike.
- ``agreement`` checks that both sides produced the same answers (greedy
  decoding of the same tokens on the same engine must): the same prompt and
  completion token counts and the same text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from loadtest.stats import RequestTrace, Summary

SYSTEM = " ".join(
    f"Rule {i}: answer politely, cite the handbook section {i}, and never reveal internal notes." for i in range(24)
)
WARMUP_SYSTEM = " ".join(f"Note {i}: keep answers short and name the weather in city {i}." for i in range(24))
TOPICS = ["the sea", "mountains", "bread", "rivers", "trains", "clocks", "gardens", "bees", "stars", "salt"]
WORKLOADS = ("shared-prefix", "distinct")

Messages = list[dict[str, str]]
#: A round: side name → workload → statistics.
Round = Mapping[str, Mapping[str, Summary]]


@dataclass(frozen=True)
class Prompt:
    """One request: an optional system prompt and a user message, and their chat-template token ids."""

    system: str
    user: str
    token_ids: tuple[int, ...] = ()

    def messages(self) -> Messages:
        system = [{"role": "system", "content": self.system}] if self.system else []
        return [*system, {"role": "user", "content": self.user}]


def prompts(
    kind: str, n: int, encode: Callable[[Messages], Sequence[int]], *, default_system: str = ""
) -> list[Prompt]:
    """``n`` requests of workload ``kind``; ``default_system`` stands in where the workload has no system prompt.

    - ``shared-prefix``: one long system prompt (~530 prompt tokens with the template), distinct questions;
    - ``distinct``: distinct questions under ``default_system`` (the mesh's router sends its own
      default there, so it is made explicit for vLLM too; empty: the chat template's default).
    """
    if kind not in WORKLOADS:
        raise ValueError(f"unknown workload {kind!r}; choose from {', '.join(WORKLOADS)}")
    system = SYSTEM if kind == "shared-prefix" else default_system
    return [encoded(system, f"Tell me one fact about {TOPICS[i % len(TOPICS)]} (#{i}).", encode) for i in range(n)]


def warmup(encode: Callable[[Messages], Sequence[int]], *, default_system: str = "") -> list[Prompt]:
    """A short and a long prompt, so neither side's first measured prefill pays a first-shape cost.

    The long one shares no prefix-cache block with the workloads (its text differs from the first token on).
    """
    return [encoded(default_system, "Hi", encode), encoded(WARMUP_SYSTEM, "Hi", encode)]


def encoded(system: str, user: str, encode: Callable[[Messages], Sequence[int]]) -> Prompt:
    p = Prompt(system, user)
    return Prompt(system, user, tuple(int(t) for t in encode(p.messages())))


def order(round_index: int, sides: Sequence[str]) -> list[str]:
    """The sides in the order they run in round ``round_index`` (0-based): as given, then reversed, and so on."""
    return list(sides) if round_index % 2 == 0 else list(reversed(sides))


def spread_tokens(trace: RequestTrace, total: int) -> None:
    """Spread ``total`` tokens over a trace's messages, for a stream that sends text but not token counts."""
    if not trace.chunks:
        return
    per, extra = divmod(total, len(trace.chunks))
    trace.chunks = [(t, per + (1 if i < extra else 0)) for i, (t, _) in enumerate(trace.chunks)]


@dataclass
class Completion:
    """What one request produced: text (or token ids, decoded later) and the server's token accounting."""

    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class Agreement:
    """How many of ``requests`` answers match between the two sides, and the first that does not."""

    requests: int
    same_prompt_tokens: int
    same_completion_tokens: int
    same_text: int
    first_difference: str = ""

    @property
    def identical(self) -> bool:
        return self.requests == self.same_prompt_tokens == self.same_completion_tokens == self.same_text


def agreement(ours: Sequence[Completion], theirs: Sequence[Completion]) -> Agreement:
    """Compare answers request by request (both lists in request order, texts already decoded)."""
    if len(ours) != len(theirs):
        raise ValueError(f"{len(ours)} answers against {len(theirs)}")
    prompt = completion = text = 0
    first = ""
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        same = (a.prompt_tokens == b.prompt_tokens, a.completion_tokens == b.completion_tokens, a.text == b.text)
        prompt, completion, text = prompt + same[0], completion + same[1], text + same[2]
        if not first and not all(same):
            first = (
                f"request {i}: prompt {a.prompt_tokens}/{b.prompt_tokens} tokens, "
                f"completion {a.completion_tokens}/{b.completion_tokens}, text {a.text!r} / {b.text!r}"
            )
    return Agreement(len(ours), prompt, completion, text, first)


def ratios(rounds: Sequence[Round], kind: str, ours: str, theirs: str = "vllm") -> dict[str, float]:
    """Ours over theirs, each the mean over rounds: throughput (> 1 favours ours), TTFT p50 and ITL p50 (< 1)."""

    def mean(who: str, f: Callable[[Summary], float]) -> float:
        return sum(f(rd[who][kind]) for rd in rounds) / len(rounds)

    def ratio(f: Callable[[Summary], float]) -> float:
        return mean(ours, f) / mean(theirs, f)

    return {
        "throughput": ratio(lambda s: s.output_tok_s),
        "ttft_p50": ratio(lambda s: s.ttft_p50),
        "itl_p50": ratio(lambda s: s.itl_p50),
    }


def rounds_table(rounds: Sequence[Round]) -> str:
    """One markdown row per round, workload and side, in the order they ran."""
    lines = [
        "| round | workload | target | out tok/s | TTFT p50 | TTFT p99 | ITL p50 | ITL p99 | errors |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r, rd in enumerate(rounds, 1):
        kinds = dict.fromkeys(k for res in rd.values() for k in res)
        for kind in kinds:
            for who, res in rd.items():
                s = res[kind]
                lines.append(
                    f"| {r} | {kind} | {who} | {s.output_tok_s:.1f} | {s.ttft_p50 * 1e3:.0f} ms | "
                    f"{s.ttft_p99 * 1e3:.0f} ms | {s.itl_p50 * 1e3:.1f} ms | {s.itl_p99 * 1e3:.1f} ms | {s.errors} |"
                )
    return "\n".join(lines)


def ratios_table(rounds: Sequence[Round], kinds: Sequence[str], ours: str, theirs: str = "vllm") -> str:
    """Mean ratios ours/theirs per workload, as markdown."""
    lines = [
        f"| workload ({ours}/{theirs}, mean of {len(rounds)} rounds) | throughput | TTFT p50 | ITL p50 |",
        "|---|---:|---:|---:|",
    ]
    for kind in kinds:
        r = ratios(rounds, kind, ours, theirs)
        lines.append(f"| {kind} | {r['throughput']:.3f}× | {r['ttft_p50']:.3f}× | {r['itl_p50']:.3f}× |")
    return "\n".join(lines)
