"""Load-test plumbing: workloads, report table, BENCHMARKS.md section replacement."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtest import head_to_head as h2h
from loadtest import suite
from loadtest.report import table
from loadtest.stats import RequestTrace, Summary, summarize
from loadtest.workloads import build


def test_workloads() -> None:
    sessions = build("sessions", 8)
    assert {r.session for r in sessions} == {0, 1} and all(r.system_prompt for r in sessions)
    assert [r.priority for r in build("mixed", 6)] == [0, 1, 2, 0, 1, 2]
    assert all(r.tools for r in build("agent", 3))
    assert len({r.text for r in build("distinct", 20)}) == 20
    with pytest.raises(ValueError, match="unknown workload"):
        build("nope", 1)


def test_table_renders_every_run() -> None:
    s = summarize([RequestTrace(sent=0, chunks=[(0.1, 1), (0.2, 1)], done=0.2)], wall_s=1.0)
    text = table({"a": s, "b": s})
    assert text.count("\n") == 3 and "| a | 1.00 | 2.0 | 100.0/100.0 |" in text


def test_sections_are_replaced_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = tmp_path / "BENCHMARKS.md"
    doc.write_text("# Benchmarks\n\nhand-written intro\n")
    monkeypatch.setattr(suite, "BENCHMARKS", doc)
    suite.write_section("tools", "first result", "make bench")
    suite.write_section("wire", "wire result", "make bench")
    suite.write_section("tools", "second result", "make bench")
    text = doc.read_text()
    assert "hand-written intro" in text and "second result" in text and "first result" not in text
    assert text.index("<!-- bench:tools -->") < text.index("<!-- bench:wire -->")
    assert text.count("<!-- bench:tools -->") == 1


def _chars(messages: list[dict[str, str]]) -> list[int]:
    """A stand-in chat template: one token per character of role and content."""
    return [ord(c) for m in messages for c in f"<{m['role']}>{m['content']}"]


def test_head_to_head_prompts_carry_the_same_messages_and_their_tokens() -> None:
    shared = h2h.prompts("shared-prefix", 3, _chars)
    assert {p.system for p in shared} == {h2h.SYSTEM} and len({p.user for p in shared}) == 3
    assert all(list(p.token_ids) == _chars(p.messages()) for p in shared)
    distinct = h2h.prompts("distinct", 2, _chars, default_system="be brief")
    assert [p.messages()[0] for p in distinct] == [{"role": "system", "content": "be brief"}] * 2
    assert [m["role"] for m in h2h.prompts("distinct", 1, _chars)[0].messages()] == ["user"]
    with pytest.raises(ValueError, match="unknown workload"):
        h2h.prompts("nope", 1, _chars)


def test_head_to_head_warmup_shares_no_prefix_with_the_workload() -> None:
    long_warmup = h2h.warmup(_chars)[1].token_ids
    workload = h2h.prompts("shared-prefix", 1, _chars)[0].token_ids
    common = next(i for i, (a, b) in enumerate(zip(long_warmup, workload, strict=False)) if a != b)
    assert common == len("<system>") and len(long_warmup) > len(workload) // 2


def test_head_to_head_rounds_alternate_order() -> None:
    assert [h2h.order(r, ("mesh", "vllm")) for r in range(3)] == [["mesh", "vllm"], ["vllm", "mesh"], ["mesh", "vllm"]]


def test_spread_tokens_over_text_messages() -> None:
    trace = RequestTrace(sent=0.0, chunks=[(0.1, 1), (0.2, 1), (0.3, 1)])
    h2h.spread_tokens(trace, 8)
    assert [n for _, n in trace.chunks] == [3, 3, 2] and trace.tokens == 8
    empty = RequestTrace(sent=0.0)
    h2h.spread_tokens(empty, 5)
    assert empty.tokens == 0


def test_agreement_finds_the_first_different_answer() -> None:
    ours = [h2h.Completion("a", prompt_tokens=5, completion_tokens=2), h2h.Completion("b", [], 5, 3)]
    theirs = [h2h.Completion("a", [7, 8], 5, 2), h2h.Completion("bc", [7, 8, 9, 2], 5, 4)]
    same = h2h.agreement(ours[:1], theirs[:1])
    assert same.identical and same.first_difference == ""
    differ = h2h.agreement(ours, theirs)
    assert not differ.identical
    assert (differ.same_prompt_tokens, differ.same_completion_tokens, differ.same_text) == (2, 1, 1)
    assert differ.first_difference.startswith("request 1: prompt 5/5 tokens, completion 3/4")
    with pytest.raises(ValueError, match="1 answers against 2"):
        h2h.agreement(ours[:1], theirs)


def _summary(tokens: int, ttft: float, wall_s: float) -> Summary:
    trace = RequestTrace(sent=0.0, chunks=[(ttft, 1)] + [(ttft + 0.1 * i, 1) for i in range(1, tokens)], done=1.0)
    return summarize([trace], wall_s)


def test_head_to_head_ratios_are_means_over_rounds() -> None:
    rounds = [
        {"mesh": {"w": _summary(10, 0.2, 1.0)}, "vllm": {"w": _summary(10, 0.1, 2.0)}},
        {"vllm": {"w": _summary(10, 0.3, 2.0)}, "mesh": {"w": _summary(10, 0.2, 1.0)}},
    ]
    r = h2h.ratios(rounds, "w", "mesh")
    assert r["throughput"] == pytest.approx(2.0) and r["ttft_p50"] == pytest.approx(1.0)
    assert r["itl_p50"] == pytest.approx(1.0)
    rows = h2h.rounds_table(rounds).splitlines()
    assert len(rows) == 6 and rows[2].startswith("| 1 | w | mesh | 10.0 | 200 ms") and "| 2 | w | vllm |" in rows[4]
    assert "| w | 2.000× | 1.000× | 1.000× |" in h2h.ratios_table(rounds, ["w"], "mesh")
