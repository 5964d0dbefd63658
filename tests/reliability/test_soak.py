"""A short soak (the full 10-minute one is ``make soak``): steady ~70% load, no errors, memory and fds flat."""

from __future__ import annotations

from pathlib import Path

from tests.support.soak import run

MIB = 1024 * 1024


async def test_short_soak_has_no_errors_and_flat_memory_and_descriptors(tmp_path: Path) -> None:
    result = await run(seconds=30, warm_up_s=10, folder=tmp_path)
    print("\n".join(result.lines()))
    assert result.turns > 100 and not result.errors, result.errors[:5]
    for name, start in result.start.items():
        end = result.end[name]
        # 5% as the full soak, with a floor for the allocator's granularity over a short window.
        assert end.rss - start.rss < max(start.rss * 0.05, 4 * MIB), "\n".join(result.lines())
        assert end.fds <= start.fds + 2, "\n".join(result.lines())
