"""The Markdown summary of an LLM job's ``OUT.stats.json`` (`dualview.synth.runner`): what
came in, what came out, why units were dropped, and what it cost in calls, tokens and time.

``docs/results.md`` renders committed stats files with it (`dualview.docgen.results_doc`).
"""

from __future__ import annotations

from typing import Any

#: keys that make a JSON object an LLM job's stats
STATS_KEYS = frozenset({"task", "units", "outcomes", "records_out", "llm_calls"})


def is_job_stats(data: object) -> bool:
    return isinstance(data, dict) and data.keys() >= STATS_KEYS


def _seconds(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def stats_markdown(stats: dict[str, Any]) -> str:
    """One table, a measure per row (``rejections`` appears in stats written since it
    existed; older files say so)."""
    outcomes = stats["outcomes"]
    rejections = stats.get("rejections")
    if rejections is None:
        why = "not recorded (stats written before the field)"
    else:
        why = ", ".join(f"{code or 'unknown'} {n}" for code, n in rejections.items()) or "-"
    latency = stats.get("latency_s") or {}
    p50, p95 = _seconds(latency.get("p50")), _seconds(latency.get("p95"))
    rows = [
        ("task", f"`{stats['task']}`"),
        ("model", f"`{stats.get('model', 'n/a')}`"),
        ("units in", str(stats["units"])),
        ("accepted (ok)", str(outcomes.get("ok", 0))),
        ("impossible (the LLM said so)", str(outcomes.get("impossible", 0))),
        ("rejected by the parser", str(outcomes.get("rejected", 0))),
        ("rejections by reason", why),
        ("errors", str(outcomes.get("error", 0))),
        ("records out", str(stats["records_out"])),
        ("LLM calls", str(stats["llm_calls"])),
        ("prompt / completion tokens", f"{stats['tokens_in']} / {stats['tokens_out']}"),
        ("latency per call, p50 / p95 (s)", f"{p50} / {p95}"),
    ]  # fmt: skip
    lines = ["| measure | value |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines) + "\n"
