"""Read evaluation result JSONs and training logs into report rows.

Column names follow the paper's table (``FollowIR p-MRR``, ``FollowIR Score``,
``InfoSearch <dim> p-MRR``, ``MAIR <task> nDCG@10``); any other benchmark contributes its
headline metrics as ``<label> <metric>``. IR measures are stored as fractions and shown x100
(:func:`dualview.eval.run.display_value`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dualview.eval.run import display_value, model_slug
from dualview.report.table import ConfigResult

# Headline metrics of benchmarks outside the paper's columns.
EXTRA_METRICS = {
    "beir": ("nDCG@10", "Recall@100"),
    "paired": ("pairwise accuracy", "p-MRR", "nDCG@10"),
    "instructir": ("nDCG@10", "Robustness@10"),
}


def paper_columns(kind: str, label: str, metrics: dict[str, float]) -> dict[str, float]:
    """Map one benchmark's metrics to report columns (values already x100)."""
    out: dict[str, float] = {}
    if kind == "followir":
        for name, column in (("p-MRR", "FollowIR p-MRR"), ("Score", "FollowIR Score")):
            if name in metrics:
                out[column] = display_value(name, metrics[name])
    elif kind == "infosearch":
        for name, value in metrics.items():
            dim, _, metric = name.partition("/")
            if metric == "p-MRR":
                out[f"InfoSearch {dim} p-MRR"] = value
    elif kind == "mair":
        for name, value in metrics.items():
            task, _, metric = name.partition("/")
            if metric == "nDCG@10":
                out[f"MAIR {task} nDCG@10"] = display_value(metric, value)
    else:
        for name in EXTRA_METRICS.get(kind, tuple(metrics)):
            if name in metrics:
                out[f"{label} {name}"] = display_value(name, metrics[name])
    return out


def pmrr_per_query(label: str, payload: dict[str, Any]) -> dict[str, list[float]]:
    """Per-query p-MRR values for plots: the overall ``p-MRR`` when it has per-query values
    (paired sets), otherwise one entry per ``<set>/p-MRR`` (FollowIR sets, InfoSearch dims)."""
    per_query = payload.get("per_query", {})
    if per_query.get("p-MRR"):
        return {label: [float(v) for v in per_query["p-MRR"].values()]}
    out: dict[str, list[float]] = {}
    for name, values in per_query.items():
        part, _, metric = name.rpartition("/")
        if metric == "p-MRR" and part and values:
            out[f"{label} {part}"] = [float(v) for v in values.values()]
    return out


def read_loss_log(path: Path) -> list[tuple[int, float]]:
    """``(step, loss)`` pairs from a JSON-lines training log (lines without a loss skipped)."""
    curve = []
    if not path.is_file():
        return curve
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict) and "loss" in entry and "step" in entry:
            curve.append((int(entry["step"]), float(entry["loss"])))
    return curve


def collect_rows(
    eval_dir: str | Path,
    configurations: dict[str, str],
    loss_logs: dict[str, Path] | None = None,
) -> list[ConfigResult]:
    """Rows for ``configurations`` (label -> model name as given to ``evaluate``)."""
    rows = []
    for label, model_name in configurations.items():
        row = ConfigResult(label)
        folder = Path(eval_dir) / model_slug(model_name)
        for path in sorted(folder.glob("*.json")):
            payload = json.loads(path.read_text(encoding="utf-8"))
            bench = payload["benchmark"]
            kind, bench_label = bench["name"], bench["label"]
            row.metrics.update(paper_columns(kind, bench_label, payload["metrics"]))
            row.per_query.update(pmrr_per_query(bench_label, payload))
        if loss_logs and label in loss_logs:
            row.loss_curve = read_loss_log(Path(loss_logs[label]))
        rows.append(row)
    return rows
