"""``make eval``'s harness end to end on the real engine: a few easy dev cases through the embedding router.

Reuses the session's vLLM replica (no second engine) and ``start_eval_mesh``,
the wiring ``make eval`` uses. Asserts the shape of the report and the tool
choice on cases any working router gets right; never latencies, which belong
to the eval itself.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from evals.__main__ import EvalMesh, machine_description, start_eval_mesh
from evals.cases import load_cases
from evals.report import RunInfo, render_markdown
from evals.runner import progress_line, run_eval
from evals.scoring import score_turn
from tests.e2e.conftest import VllmReplica

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(600)]

#: A calculation, a plain question, a clock question and a two-turn session, in file order.
EASY = ("dev-calc-01", "dev-clock-01", "dev-none-01", "dev-follow-01")


@pytest.fixture
async def eval_mesh(vllm_replica: VllmReplica, redis_client: aioredis.Redis) -> AsyncIterator[EvalMesh]:
    mesh = await start_eval_mesh(redis_client, vllm_replica.server.address, ["embedding"])
    yield mesh
    await mesh.close()


async def test_easy_dev_cases_run_score_and_render(eval_mesh: EvalMesh) -> None:
    cases = [c for c in load_cases(["dev"]) if c.id in EASY]
    assert [c.id for c in cases] == list(EASY)
    lines: list[str] = []
    report = await run_eval(cases, eval_mesh.stubs, progress=lines.append)

    assert report.modes == ("embedding",) and report.splits == ("dev",)
    assert report.cases == {"dev": 4} and report.turns("dev") == 5 and len(lines) == 5
    records = report.records
    assert [(r.case_id, r.turn_index) for r in records] == [
        ("dev-calc-01", 1),
        ("dev-clock-01", 1),
        ("dev-none-01", 1),
        ("dev-follow-01", 1),
        ("dev-follow-01", 2),
    ]
    assert [r.error for r in records] == [""] * 5, lines
    for r in records:
        assert r.session_id and r.latency_s is not None and r.generations >= 1
        assert r.tool_selection in {"embedding", "llm"}
        assert (r.ttft_client_s is None) == (r.answer == "")
    first, second = records[3], records[4]
    assert second.session_id == first.session_id  # the follow-up continued the session
    assert len({r.session_id for r in records}) == 4  # every case started its own

    # The easy single turns: the right tools, nothing else. (The follow-up's second
    # turn needs the history and is the eval's business, not a smoke test's.)
    assert all(score_turn(r).tool_ok for r in records[:4]), lines
    assert [sorted(r.tools_called) for r in records[:4]] == [["calculator"], ["clock"], [], ["calculator"]]

    summary = report.summary("embedding", "dev")
    assert summary.turns == 5 and summary.errors == 0 and summary.tool_choice.total == 5
    assert summary.tool_choice.hits >= 4 and summary.latency_p50 is not None

    text = render_markdown(report, RunInfo("pytest", "today", machine_description(), "SmolLM2-135M-Instruct"))
    for section in ("# Agent evaluation", "## Dev split (tuned on)", "| tool choice (exact set) |", "## Failing turns"):
        assert section in text
    assert "## Held-out" not in text and progress_line(records[0]) in lines[0]
