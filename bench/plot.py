"""Draws bench-results/load.png from the load benchmark's report: throughput and latency.

.venv/bin/python bench/plot.py [bench-results/load.json] [out.png]
"""

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display on servers and CI

import matplotlib.pyplot as plt

ROOT = Path(__file__).resolve().parent.parent


def draw(report: dict[str, Any], out: Path) -> None:
    rows = [(name, r, "garante") for name, r in report["scenarios"].items()]
    rows += [(name, r, "sdk") for name, r in report["sdk"].items()]
    rows += [(name, r, "variant") for name, r in report.get("variants", {}).items()]
    if not rows:
        return
    names = [name for name, _, _ in rows]
    colors = [
        "#ff7f0e"
        if kind == "sdk"
        else "#9e9e9e"
        if name.startswith("baseline")
        else "#2ca02c"
        if kind == "variant"
        else "#1f77b4"
        for name, _, kind in rows
    ]
    positions = list(range(len(rows)))[::-1]

    figure, (left, right) = plt.subplots(
        1, 2, figsize=(14, 0.55 * len(rows) + 2.2), sharey=True, gridspec_kw={"wspace": 0.05}
    )
    throughput = [r["rps"] for _, r, _ in rows]
    left.barh(positions, throughput, color=colors)
    for y, value, (_, r, _) in zip(positions, throughput, rows, strict=True):
        share = r.get("ratio")
        reference = r.get("ratio_to", "").removeprefix("baseline: ")
        label = f"{value:,.0f}" + (f"  ({share:.2f}x {reference})" if share else "")
        left.text(value, y, " " + label, va="center", fontsize=8)
    left.set_yticks(positions, names, fontsize=9)
    left.set_xlabel("requests per second (higher is better)")
    left.set_xlim(0, max(throughput) * 1.45)
    left.grid(axis="x", alpha=0.3)

    height = 0.26
    for offset, key, shade in (
        (height, "p50_ms", 1.0),
        (0, "p95_ms", 0.65),
        (-height, "p99_ms", 0.35),
    ):
        values = [r[key] for _, r, _ in rows]
        right.barh(
            [p + offset for p in positions],
            values,
            height=height,
            color=[(0.15, 0.35, 0.6, shade)] * len(values),
            label=key.removesuffix("_ms"),
        )
    right.set_xscale("log")
    right.set_xlabel("latency in ms, log scale (lower is better)")
    right.legend(loc="lower right", fontsize=8)
    right.grid(axis="x", alpha=0.3, which="both")

    settings = report["settings"]
    figure.suptitle(
        f"Garante tool API under wrk ({settings['concurrency']} connections) — "
        f"{settings['server']}; orange: official MCP SDK server (uvicorn)",
        fontsize=10,
    )
    figure.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(figure)


if __name__ == "__main__":
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "bench-results" / "load.json"
    target = Path(sys.argv[2]) if len(sys.argv) > 2 else source.with_suffix(".png")
    draw(json.loads(source.read_text()), target)
    print(f"wrote {target}")
