"""Read evaluation result JSONs and training logs into report rows.

Column names follow the paper's table (``FollowIR p-MRR``, ``FollowIR Score``,
``InfoSearch <dim> p-MRR``, ``MAIR <task> nDCG@10``); any other benchmark contributes its
headline metrics as ``<label> <metric>``. IR measures are stored as fractions and shown x100
(`dualview.eval.layout.display_value`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dualview.errors import DataError
from dualview.eval.layout import display_value, model_slug
from dualview.io.files import read_json_file
from dualview.report.table import ConfigResult
from dualview.train.step_log import read_loss_log

# Headline metrics of benchmarks outside the paper's columns.
EXTRA_METRICS = {
    "beir": ("nDCG@10", "Recall@100"),
    "paired": ("pairwise accuracy", "p-MRR", "nDCG@10"),
    "instructir": ("nDCG@10", "Robustness@10"),
    "phenomena": (
        "p-MRR",
        "pairwise accuracy",  # per query: what the error analysis (flips) reads
        "nDCG@10",
        "polarity/p-MRR",
        "polarity/nDCG@10",
        "negation/p-MRR",
        "negation/nDCG@10",
    ),
}
# Benchmarks in the paired layout: their files feed the error analysis (`report.flips`).
PAIRED_KINDS = ("paired", "phenomena")


def column_sources(kind: str, label: str, metrics: dict[str, float]) -> dict[str, str]:
    """Report column -> the benchmark's metric name behind it."""
    out: dict[str, str] = {}
    if kind == "followir":
        for name, column in (("p-MRR", "FollowIR p-MRR"), ("Score", "FollowIR Score")):
            if name in metrics:
                out[column] = name
    elif kind == "infosearch":
        for name in metrics:
            dim, _, metric = name.partition("/")
            if metric == "p-MRR":
                out[f"InfoSearch {dim} p-MRR"] = name
    elif kind == "mair":
        for name in metrics:
            task, _, metric = name.partition("/")
            if metric == "nDCG@10":
                out[f"MAIR {task} nDCG@10"] = name
    else:
        for name in EXTRA_METRICS.get(kind, tuple(metrics)):
            if name in metrics:
                out[f"{label} {name}"] = name
    return out


def paper_columns(kind: str, label: str, metrics: dict[str, float]) -> dict[str, float]:
    """Map one benchmark's metrics to report columns (values already x100)."""
    sources = column_sources(kind, label, metrics)
    return {column: display_value(name, metrics[name]) for column, name in sources.items()}


def query_values(
    kind: str, label: str, payload: dict[str, Any]
) -> dict[str, dict[str, list[float]]]:
    """Per report column, each query's value (x100 like the column) as a one-run list, for
    the columns whose metric has per-query values in the result file."""
    per_query = payload.get("per_query") or {}
    out: dict[str, dict[str, list[float]]] = {}
    for column, name in column_sources(kind, label, payload["metrics"]).items():
        values = per_query.get(name)
        if isinstance(values, dict) and values:
            out[column] = {str(q): [display_value(name, float(v))] for q, v in values.items()}
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


def _add_result(row: ConfigResult, path: Path) -> None:
    """One evaluation JSON into ``row``; a file of another shape is a located error."""
    payload = read_json_file(path)
    try:
        bench = payload["benchmark"]
        kind, bench_label = bench["name"], bench["label"]
        row.metrics.update(paper_columns(kind, bench_label, payload["metrics"]))
        row.per_query.update(pmrr_per_query(bench_label, payload))
        row.query_values.update(query_values(kind, bench_label, payload))
        if kind in PAIRED_KINDS:
            row.sources[bench_label] = [str(f) for f in bench.get("files", [])]
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise DataError(path, None, "json", f"not a dualview eval result ({exc!r})") from None


def eval_file_row(name: str, path: Path) -> ConfigResult:
    """A row named ``name`` from one evaluation JSON of ``dualview eval`` (its columns, as a
    report shows them)."""
    row = ConfigResult(name)
    _add_result(row, path)
    return row


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
            _add_result(row, path)
        if loss_logs and label in loss_logs:
            row.loss_curve = read_loss_log(Path(loss_logs[label]))
        rows.append(row)
    return rows
