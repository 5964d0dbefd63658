"""Reports: a readable table, a JSON file and a PNG plot (latency CDFs and throughput)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from loadtest.stats import RequestTrace, Summary


def ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value * 1e3:.1f}"


def table(rows: Mapping[str, Summary]) -> str:
    head = (
        "| run | req/s | out tok/s | TTFT p50/p99 ms | TPOT p50 ms | ITL p50/p99 ms | E2E p50/p99 ms "
        "| goodput req/s | errors |"
    )
    lines = [head, "|" + "---|" * 9]
    for name, s in rows.items():
        errors = ", ".join(f"{k} {v}" for k, v in s.errors_by_code.items()) or "0"
        lines.append(
            f"| {name} | {s.request_rps:.2f} | {s.output_tok_s:.1f} | {ms(s.ttft.p50)}/{ms(s.ttft.p99)} "
            f"| {ms(s.tpot.p50)} | {ms(s.itl.p50)}/{ms(s.itl.p99)} | {ms(s.e2e.p50)}/{ms(s.e2e.p99)} "
            f"| {s.goodput_rps:.2f} | {errors} |"
        )
    return "\n".join(lines)


def to_json(rows: Mapping[str, Summary], extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {
        "runs": {
            name: {**asdict(s), "output_tok_s": s.output_tok_s, "request_rps": s.request_rps}
            for name, s in rows.items()
        },
        **(extra or {}),
    }


def write_json(path: Path, rows: Mapping[str, Summary], extra: Mapping[str, Any] | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_json(rows, extra), indent=2, default=str))


def plot(path: Path, runs: Mapping[str, Sequence[RequestTrace]], summaries: Mapping[str, Summary], title: str) -> None:
    """TTFT and ITL CDFs per run, and output throughput bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for name, traces in runs.items():
        ok = [t for t in traces if t.error is None and not t.warmup]
        for ax, values in (
            (axes[0], [t.ttft for t in ok if t.ttft is not None]),
            (axes[1], [g for t in ok for g in t.itls()]),
        ):
            if values:
                xs = sorted(v * 1e3 for v in values)
                ax.plot(xs, [(i + 1) / len(xs) for i in range(len(xs))], label=name)
    axes[0].set(title="TTFT CDF", xlabel="ms", ylabel="fraction of requests")
    axes[1].set(title="inter-token latency CDF", xlabel="ms", ylabel="fraction of tokens")
    for ax in axes[:2]:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    names = list(summaries)
    axes[2].bar(names, [summaries[n].output_tok_s for n in names], color="tab:blue")
    axes[2].set(title="output throughput", ylabel="tokens/s")
    axes[2].tick_params(axis="x", rotation=30)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
