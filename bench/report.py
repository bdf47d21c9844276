"""Ratios, verdicts against the targets and the printed table of a load benchmark run."""

import os
import statistics
import sys
from pathlib import Path
from typing import Any

from bench.config import BALANCED_SHARE, GROWTH_TARGET, RSS_TARGET, SDK_TARGET, SQL_BUDGETS, TARGETS
from bench.database import psql


def ratio(value: float, reference: float) -> float | None:
    return round(value / reference, 3) if reference else None


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def machine() -> dict[str, Any]:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "unknown",
    )
    memory_kib = int(Path("/proc/meminfo").read_text().split()[1])
    postgres = psql("SHOW server_version", database="postgres")
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(memory_kib / 1024 / 1024, 1),
        "python": sys.version.split()[0],
        "postgresql": postgres,
        "kernel": os.uname().release,
        "load_average_at_start": os.getloadavg(),
    }


def round_ratios(report: dict[str, Any], name: str, reference: str) -> list[float]:
    """`name`'s req/s over `reference`'s, within each round."""
    ours = report.get("round_rps", {}).get(name, [])
    theirs = report.get("round_rps", {}).get(reference, [])
    return [a / b for a, b in zip(ours, theirs, strict=False) if b]


def evaluate(report: dict[str, Any]) -> None:
    """Ratios (medians of the rounds' ratios) and verdicts against issue 29's targets."""
    rows = report["scenarios"]
    verdicts = report["verdicts"] = {}
    for name, result in rows.items():
        if name not in TARGETS:
            continue
        reference, target = TARGETS[name]
        ratios = round_ratios(report, name, reference)
        if not ratios:
            continue
        result["ratio"] = round(median(ratios), 3)
        result["ratio_to"] = reference
        result["ratio_rounds"] = [round(value, 3) for value in ratios]
        verdicts[name] = {
            "measured": result["ratio"],
            "target": f">= {target}x {reference.removeprefix('baseline: ')}",
            "met": result["ratio"] >= target,
        }
    if "list_services" in rows and report["sdk"]:
        fastest_name = max(report["sdk"], key=lambda name: report["sdk"][name]["rps"])
        for sdk_name, result in report["sdk"].items():
            result["ours_over_it"] = round(
                median(round_ratios(report, "list_services", sdk_name)), 3
            )
        value = report["sdk"][fastest_name]["ours_over_it"]
        verdicts[f"list_services vs SDK ({fastest_name})"] = {
            "measured": value,
            "target": f">= {SDK_TARGET}x SDK",
            "met": value >= SDK_TARGET,
        }
    queries = report.get("queries", {})
    for name, budget in SQL_BUDGETS.items():
        if name in queries:
            verdicts[f"SQL per call: {name}"] = {
                "measured": queries[name],
                "target": f"<= {budget}",
                "met": queries[name] <= budget,
            }
    for name, result in report.get("variants", {}).items():
        on = name.split(" [off: ")[0]
        gains = [a - 1 for a in round_ratios(report, on, name)]
        if gains:
            result["gain"] = round(median(gains), 3)
            result["gain_rounds"] = [round(value, 3) for value in gains]
    growth = report["growth"]
    for kind, label in (("slots", "slot search"), ("replay", "key lookup (replay)")):
        small, large = growth.get(f"{kind}_small"), growth.get(f"{kind}_large")
        if small and large:
            value = ratio(large["p50_ms"], small["p50_ms"])
            growth[f"{kind}_p50_ratio"] = value
            verdicts[f"growth: {label}, {small['rows']:,} -> {large['rows']:,} rows (p50)"] = {
                "measured": value,
                "target": f"<= {GROWTH_TARGET}",
                "met": value is not None and value <= GROWTH_TARGET,
            }
    for kind, label in (("slots", "slot search query"), ("replay", "key lookup")):
        small, large = growth.get(f"{kind}_small"), growth.get(f"{kind}_large")
        if small and large and small.get("sql_lookup_ms"):
            value = ratio(large["sql_lookup_ms"], small["sql_lookup_ms"])
            growth[f"{kind}_sql_ratio"] = value
            # Informational: microseconds of index work, where one more B-tree level shows
            # as a large ratio of tiny numbers; the target is on the call's latency above.
            name = f"(info) {label} in SQL alone, {small['rows']:,} -> {large['rows']:,} rows"
            verdicts[name] = {
                "measured": value,
                "target": f"{small['sql_lookup_ms']:.3f}->{large['sql_lookup_ms']:.3f} ms",
                "met": None,
            }
    start, small = growth.get("slots_at_start"), growth.get("slots_small")
    if start and small:
        value = ratio(small["p50_ms"], start["p50_ms"])
        name = f"(info) slot search p50, {start['rows']:,} rows, drift over the run"
        verdicts[name] = {
            "measured": value,
            "target": f"{start['p50_ms']:.2f}->{small['p50_ms']:.2f} ms",
            "met": None,
        }
    memory = report.get("memory")
    if memory:
        value = ratio(memory["rss_after_kib"] - memory["rss_before_kib"], memory["rss_before_kib"])
        memory["growth"] = value
        verdicts[f"worker RSS growth over {memory['calls']:,} calls"] = {
            "measured": value,
            "target": f"<= {RSS_TARGET}",
            "met": value is not None and value <= RSS_TARGET,
        }


def render(report: dict[str, Any]) -> str:
    settings = report["settings"]
    lines = ["", f"Garante load benchmark — {settings['server']}"]
    lines.append(
        f"wrk, {settings['concurrency']} connections, {settings['seconds_per_scenario']:g} s "
        f"per run, medians of {settings.get('rounds', 1)} interleaved rounds; "
        f"{report['machine']['cores']} cores ({report['machine']['cpu']}); load average "
        f"{report['machine']['load_average_at_start'][0]:.1f} at start, "
        f"{report['machine'].get('load_average_at_end', [0])[0]:.1f} at end"
    )
    header = f"{'row':<52}{'req/s':>8}{'p50 ms':>8}{'p99 ms':>8}{'SQL':>5}{'cpu ms':>8}"
    header += f"{'pg ms':>7}  {'ratio':>6}  {'target':<30}verdict"
    lines += ["", header, "-" * len(header)]
    queries = report.get("queries", {})
    verdicts = report.get("verdicts", {})
    ordered = report.get("rows") or [*report["scenarios"], *report["sdk"]]
    buckets = {**report["scenarios"], **report["sdk"], **report.get("variants", {})}
    for name in ordered:
        result = buckets.get(name)
        if result is None:
            continue
        ratio_text, target, verdict = "", "", ""
        if "ratio" in result:
            ratio_text = f"{result['ratio']:.2f}x"
            target = verdicts[name]["target"]
            verdict = "met" if verdicts[name]["met"] else "MISSED"
        elif "ours_over_it" in result:
            ratio_text = f"{result['ours_over_it']:.2f}x"
            target = "(list_services / this)"
        elif "gain" in result:
            ratio_text = f"{result['gain']:+.0%}"
            target = "(gain of the mechanism)"
        lines.append(
            f"{name[:51]:<52}{result['rps']:>8.0f}{result['p50_ms']:>8.1f}{result['p99_ms']:>8.1f}"
            f"{queries.get(name, ''):>5}{result.get('server_cpu_ms', 0):>8.2f}"
            f"{result.get('postgres_cpu_ms', 0):>7.2f}  {ratio_text:>6}  {target:<30}{verdict}"
        )
    lines.append(
        "(ratio: the median over the rounds of req/s over the target's reference measured in "
        "the same round; for SDK rows, our list_services over that server; for [off: ...] "
        "rows, as shipped over off, minus 1. cpu ms / pg ms: CPU time per request of the "
        "server's workers / of PostgreSQL; SQL: statements per call besides BEGIN/COMMIT)"
    )
    lopsided = [
        f"{name} ({result['busiest_worker_share']:.0%})"
        for name, result in buckets.items()
        if result.get("busiest_worker_share", 0) > BALANCED_SHARE
    ]
    if lopsided:
        lines.append(
            "(one worker did most of the work in the median run of: "
            + ", ".join(lopsided)
            + "; those rows measure about one core)"
        )
    other = {name: verdict for name, verdict in verdicts.items() if name not in buckets}
    if other:
        lines += ["", f"{'other targets':<72}{'measured':>10}  {'wanted':<10} verdict"]
        for name, verdict in other.items():
            measured = "" if verdict["measured"] is None else f"{verdict['measured']:.2f}"
            lines.append(
                f"{name:<72}{measured:>10}  {verdict['target']:<10} "
                f"{'' if verdict['met'] is None else 'met' if verdict['met'] else 'MISSED'}"
            )
    memory = report.get("memory")
    if memory:
        lines.append(
            f"\nworker RSS: {memory['rss_before_kib'] / 1024:.1f} MiB -> "
            f"{memory['rss_after_kib'] / 1024:.1f} MiB over {memory['calls']:,} calls "
            f"({memory['workers']} workers)"
        )
    growth = report.get("growth", {})
    for kind, ends in (("slots", ("at_start", "small", "large")), ("replay", ("small", "large"))):
        for end in ends:
            item = growth.get(f"{kind}_{end}")
            if item:
                loaded = (
                    f", loaded in {item['load_seconds']:.0f} s" if "load_seconds" in item else ""
                )
                when = ", before the measured runs" if end == "at_start" else ""
                lines.append(
                    f"growth {kind:<6} {item['rows']:>12,} rows: p50 {item['p50_ms']:.2f} ms, "
                    f"p99 {item['p99_ms']:.2f} ms (1 connection){loaded}{when}"
                )
    if report.get("profiles"):
        lines += ["", "Where the time goes in the scenarios that missed (bench/cpu_breakdown.py):"]
        lines.append(report["profiles"].rstrip())
    lines.append(f"\n(total {report.get('elapsed_seconds', 0):.0f} s)")
    return "\n".join(lines)
