"""evals/MANIFEST.md lists every eval case file with its ids and case count: no set without its provenance."""

from __future__ import annotations

import fnmatch
import json
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EVALS = ROOT / "evals"
MANIFEST = (EVALS / "MANIFEST.md").read_text(encoding="utf-8")
#: A row of the summary table: | `path` | ids | cases | written by | role now |
ROW = re.compile(r"^\| `(evals/[^`]+\.jsonl)` \| ([^|]+) \| (\d+) \|", re.MULTILINE)
#: A row of the tuning-prompt batches' table: | `f-*` | 38 | ...
BATCH = re.compile(r"^\| `([a-z])-\*` \| (\d+) \|", re.MULTILINE)
TUNING_PROMPTS = "evals/probes/dev.jsonl"


def manifest_rows() -> dict[str, tuple[str, int]]:
    rows = {path: (ids.strip(), int(cases)) for path, ids, cases in ROW.findall(MANIFEST)}
    assert rows, "no summary rows found in evals/MANIFEST.md"
    return rows


def case_ids(path: str) -> list[str]:
    lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["id"] for line in lines if line.strip()]


def test_every_case_file_is_in_the_manifest_and_nothing_else() -> None:
    on_disk = {p.relative_to(ROOT).as_posix() for p in EVALS.rglob("*.jsonl")}
    assert set(manifest_rows()) == on_disk


def test_each_row_counts_its_files_cases_and_names_their_ids() -> None:
    for path, (ids, cases) in manifest_rows().items():
        found = case_ids(path)
        assert len(found) == cases, f"{path}: the manifest says {cases} cases, the file holds {len(found)}"
        if path != TUNING_PROMPTS:
            pattern = ids.strip("`")
            stray = [i for i in found if not fnmatch.fnmatch(i, pattern)]
            assert not stray, f"{path}: ids outside {pattern}: {stray[:3]}"


def test_the_tuning_prompts_batches_are_each_accounted_for() -> None:
    batches = {prefix: int(cases) for prefix, cases in BATCH.findall(MANIFEST)}
    assert Counter(i.split("-", 1)[0] for i in case_ids(TUNING_PROMPTS)) == batches
