"""The degenerate-answer scorer (evals/degenerate.py): each kind caught, and the near misses left alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from evals.cases import TurnSpec
from evals.chat.__main__ import BEGIN, Row, Scored, choose, render, write_section
from evals.degenerate import Verdict, judge, words
from evals.records import TurnRecord
from services.router.turn.prompt import DEFAULT_SYSTEM_PROMPT

SYSTEM = DEFAULT_SYSTEM_PROMPT


def reasons(answer: str, message: str = "How do I boil an egg?") -> tuple[str, ...]:
    return judge(answer, message, SYSTEM).reasons


def test_words_ignore_case_and_punctuation_and_keep_contractions() -> None:
    assert words("Hello, World! I'm fine — you’re?") == ["hello", "world", "i'm", "fine", "you're"]


@pytest.mark.parametrize("answer", ["", "   ", "...", "\n!?"])
def test_an_answer_without_words_is_empty(answer: str) -> None:
    assert reasons(answer) == ("empty",)


@pytest.mark.parametrize(
    ("message", "answer"),
    [
        ("Good morning!", "Good morning!"),
        ("Good morning!", "good morning"),
        ("Hello! How are you today?", "Hello! How are you today?"),
        ("Hello! How are you today?", "Hello! How are you today? I'm fine."),
        ("How do I boil an egg?", "How do I boil an egg? Boil it."),
    ],
)
def test_echoes(message: str, answer: str) -> None:
    assert reasons(answer, message) == ("echo",)


@pytest.mark.parametrize(
    ("message", "answer"),
    [
        ("Good morning!", "Good morning! How can I help you today?"),
        ("Say hi", "Hi! How can I help you today?"),
        ("Hi", "Hi there! What can I do for you?"),
        ("How do I boil an egg?", "Put the egg in boiling water for about nine minutes, then cool it in cold water."),
        (
            "How do I boil an egg?",
            "How do I boil an egg? Bring a pot of water to a boil, lower the egg in gently, and cook it for "
            "nine minutes before cooling it.",
        ),
    ],
)
def test_replies_that_repeat_a_little_of_the_message_are_not_echoes(message: str, answer: str) -> None:
    assert reasons(answer, message) == ()


def test_reciting_the_system_prompt_is_degenerate_but_introducing_itself_is_not() -> None:
    assert reasons("You are AgentMesh, a helpful and concise assistant. When tool results are given", "Say hi") == (
        "system_prompt",
    )
    assert reasons("Hi! Base your answer on them and state the result plainly.", "Say hi") == ("system_prompt",)
    assert reasons("Hi! I'm AgentMesh, a helpful and concise assistant. How can I help?", "Say hi") == ()
    # What the user said first is theirs to hear back (it is the echo check's business).
    quoted = "You are AgentMesh, a helpful and concise assistant"
    assert "system_prompt" not in reasons(f"{quoted}, you say.", f"Repeat after me: {quoted}")


def test_loops() -> None:
    kettle = (
        "You'll need a kettle, a pot, and a kettle. You'll need a kettle and a pot. "
        "You'll need a kettle, a pot and a kettle."
    )
    assert reasons(kettle) == ("loop",)
    assert reasons("the the the the the the") == ("loop",)
    assert reasons("I am here. I am here. I am here. I am here.") == ("loop",)
    # Twice is a phrase used twice, not a loop.
    assert reasons("Boil the water first. Then boil the water again for the tea.") == ()


def test_every_reason_is_listed_in_order() -> None:
    looped_echo = "Say hi to me. " * 3
    assert reasons(looped_echo, "Say hi to me.") == ("loop",)  # 12 words: the message is a third of them
    said = "Hi there. " * 4
    assert reasons(said, said) == ("echo", "loop")
    recited = (SYSTEM + " ") * 3
    assert reasons(recited, "Say hi") == ("system_prompt", "loop")
    assert judge("Hello!", "Hi", SYSTEM).degenerate is False
    assert judge("", "Hi", SYSTEM).degenerate is True


def _row(split: str, penalty: float, verdicts: list[tuple[str, ...]]) -> Row:
    row = Row(split, penalty)
    for i, reasons_ in enumerate(verdicts):
        record = TurnRecord(f"c{i}", "none", split, "embedding", 1, TurnSpec(f"m{i}", frozenset()), latency_s=1.0)
        row.scored.append(Scored(record, Verdict(reasons_)))
    return row


def test_the_chat_runner_chooses_on_dev_and_writes_its_own_section(tmp_path: Path) -> None:
    dev = [_row("dev", 1.0, [("echo",), ("loop",), ()]), _row("dev", 1.1, [(), ("loop",), ()])]
    dev.append(_row("dev", 1.2, [(), (), ("loop",)]))
    assert choose(dev) == 1.1  # the lowest rate; the tie with 1.2 goes to the smaller penalty
    info = {"command": "python -m evals.chat", "date": "today", "commit": "abc", "machine": "here", "model": "m"}
    section = render([*dev, _row("heldout", 1.1, [(), ()])], 1.1, info)
    assert "| dev | 1.1 (chosen) | 1/3 | 33% | 0 | 0 | 0 | 1 | 0 | 0 | 1.0 |" in section
    assert "| heldout | 1.1 (chosen) | 0/2 | 0% |" in section
    report = tmp_path / "EVAL.md"
    report.write_text("# Eval\n\nsomething\n")
    write_section(report, section)
    write_section(report, section.replace("today", "tomorrow"))  # a rerun replaces its section, nothing else
    text = report.read_text()
    assert text.startswith("# Eval\n\nsomething\n\n") and text.count(BEGIN) == 1
    assert "tomorrow" in text and "today" not in text
