"""History compression drops turns in chunks, so the rendered history prefix stays the same for many turns."""

from __future__ import annotations

from services.router.turn.prompt import Message, PastTurn, history_cut, render_history


def turns(n: int) -> list[PastTurn]:
    return [PastTurn(f"question {i} " + "x" * 100, f"answer {i} " + "y" * 100) for i in range(n)]  # ~60 tokens each


def cuts(n: int, keep: float, budget: int = 600) -> list[int]:
    """The omitted count each turn of an n-turn session uses, carried from turn to turn as the session does."""
    out, omitted = [], 0
    for i in range(n):
        omitted = history_cut(turns(i), budget, omitted=omitted, keep=keep)
        out.append(omitted)
    return out


def test_chunked_cut_changes_rarely_and_keeps_the_history_within_budget() -> None:
    chunked, per_turn = cuts(40, keep=0.5), cuts(40, keep=1.0)
    # Turn by turn (before): once over budget the count, and with it the prompt after the system prompt,
    # changes on every turn. In chunks: about once per half budget of new conversation.
    assert len(set(per_turn)) > 25
    assert len(set(chunked)) <= 8
    assert chunked == sorted(chunked)  # never brings back a dropped turn
    for i, cut in enumerate(chunked):
        history = render_history(turns(i), cut)
        assert sum(len(m.content) // 4 + 4 for m in history if m.role != "system") <= 600


def test_consecutive_prompts_share_the_history_until_the_next_chunk() -> None:
    chunked = cuts(40, keep=0.5)
    shared = 0
    for i in range(1, 40):
        before, after = render_history(turns(i - 1), chunked[i - 1]), render_history(turns(i), chunked[i])
        shared += after[: len(before)] == before
    assert shared >= 32  # per turn, this is 0 once over budget


def test_a_window_that_starts_later_counts_the_turns_before_it() -> None:
    recent = turns(30)[20:]
    cut = history_cut(recent, 10_000, first=20, omitted=3, keep=0.5)
    assert cut == 20  # nothing before the window is available to render
    history = render_history(recent, cut, first=20)
    assert history[0] == Message("system", "(20 earlier turns of this conversation omitted.)")
    assert history[1] == Message("user", recent[0].user)
