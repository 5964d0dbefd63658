"""Load-test plumbing: workloads, report table, BENCHMARKS.md section replacement."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtest import suite
from loadtest.report import table
from loadtest.stats import RequestTrace, summarize
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
