"""The README stays a front page: at most 200 lines, CI runs its test command, and its links resolve."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_LINES = 200
#: A Markdown link's target: ``[text](target)``, the target up to its closing parenthesis.
LINK = re.compile(r"\]\(([^)\s]+)\)")


def fenced_blocks(text: str) -> list[str]:
    """The contents of the ```-fenced blocks, in order."""
    return re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def test_the_readme_fits_on_a_screen_or_two() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; the long content belongs in docs/"


def test_ci_runs_exactly_the_readmes_test_command() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Two commands", 1)[1]
    commands = [line.split("#", 1)[0].strip() for line in fenced_blocks(section)[0].splitlines()]
    assert commands == ["make run", "make test"]
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    steps = [line for line in ci if line and not line.startswith(("#", "set ", "cd "))]
    assert steps == ["make test"]


def test_every_relative_link_in_the_readme_names_a_file_that_exists() -> None:
    targets = LINK.findall(README.read_text(encoding="utf-8"))
    local = [t.split("#", 1)[0] for t in targets if not re.match(r"^[a-z]+:", t)]
    assert local, "the README links into docs/"
    missing = sorted({t for t in local if t and not (ROOT / t).exists()})
    assert not missing, f"README links to files that do not exist: {missing}"
