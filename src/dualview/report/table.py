"""Result tables in the paper's layout: rows = configurations, columns = metrics.

Columns come in the paper's order (FollowIR p-MRR and Score, InfoSearch p-MRR per
dimension, MAIR IFEval and InstructIR) followed by any other benchmark's metrics in the
order first seen. The best value of each column is marked (bold in Markdown; the ``best``
row of the CSV names the configuration). For every column higher is better.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

PAPER_COLUMNS = (
    "FollowIR p-MRR",
    "FollowIR Score",
    "InfoSearch length p-MRR",
    "InfoSearch keyword p-MRR",
    "MAIR IFEval nDCG@10",
    "MAIR InstructIR nDCG@10",
)


@dataclass
class ConfigResult:
    """One row: a configuration's metrics, per-query p-MRR values and training loss."""

    name: str
    metrics: dict[str, float] = field(default_factory=dict)
    per_query: dict[str, list[float]] = field(default_factory=dict)
    loss_curve: list[tuple[int, float]] = field(default_factory=list)
    # Over several runs (seeds): sample standard deviation per metric (only for a metric
    # with values from two runs or more: one run has none), and the run count.
    spread: dict[str, float] = field(default_factory=dict)
    runs: int = 1
    # Per column with per-query values: query id -> its value in each run (significance).
    query_values: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    # Per column without them: why (the report says so instead of a paired test).
    query_notes: dict[str, str] = field(default_factory=dict)
    # Paired benchmarks' data files by benchmark label (error analysis reads the texts).
    sources: dict[str, list[str]] = field(default_factory=dict)


def parse_prefixes(text: str | None) -> tuple[str, ...]:
    """Metric name prefixes from ``"paired p-MRR, phenomena"`` (empty or None: none)."""
    return tuple(item.strip() for item in (text or "").split(",") if item.strip())


def metric_kept(metric: str, prefixes: Sequence[str]) -> bool:
    """Whether ``metric`` starts with one of ``prefixes`` (no prefixes: every metric)."""
    return not prefixes or any(metric.startswith(prefix) for prefix in prefixes)


def keep_metrics(row: ConfigResult, prefixes: Sequence[str]) -> ConfigResult:
    """``row`` with only the metric columns `metric_kept` keeps (values, spreads and the
    per-query values behind the significance tests)."""

    def kept(mapping: dict) -> dict:
        return {k: v for k, v in mapping.items() if metric_kept(k, prefixes)}

    return replace(
        row,
        metrics=kept(row.metrics),
        spread=kept(row.spread),
        query_values=kept(row.query_values),
        query_notes=kept(row.query_notes),
    )


def aggregate(runs: list[list[ConfigResult]]) -> list[ConfigResult]:
    """Rows of several runs (e.g. seeds) merged by name: mean and sample standard deviation
    of each metric, per-query values pooled, loss curves averaged per step."""
    by_name: dict[str, list[ConfigResult]] = {}
    for rows in runs:
        for row in rows:
            by_name.setdefault(row.name, []).append(row)
    merged = []
    for name, rows in by_name.items():
        out = ConfigResult(name, runs=len(rows))
        for column in dict.fromkeys(c for r in rows for c in r.metrics):
            values = [r.metrics[column] for r in rows if column in r.metrics]
            out.metrics[column] = statistics.fmean(values)
            if len(values) > 1:  # one value has no standard deviation (not 0)
                out.spread[column] = statistics.stdev(values)
        for key in dict.fromkeys(k for r in rows for k in r.per_query):
            out.per_query[key] = [v for r in rows for v in r.per_query.get(key, [])]
        for r in rows:
            for column, values in r.query_values.items():
                pooled = out.query_values.setdefault(column, {})
                for qid, vals in values.items():
                    pooled.setdefault(qid, []).extend(vals)
            for column, note in r.query_notes.items():
                out.query_notes.setdefault(column, note)
            for label, files in r.sources.items():  # runs may use different sets (folds)
                known = out.sources.setdefault(label, [])
                known += [f for f in files if f not in known]
        steps: dict[int, list[float]] = {}
        for r in rows:
            for step, loss in r.loss_curve:
                steps.setdefault(step, []).append(loss)
        out.loss_curve = [(s, statistics.fmean(v)) for s, v in sorted(steps.items())]
        merged.append(out)
    return merged


def ordered_columns(rows: list[ConfigResult]) -> list[str]:
    present = {c for row in rows for c in row.metrics}
    columns = [c for c in PAPER_COLUMNS if c in present]
    for row in rows:
        for column in row.metrics:
            if column not in columns:
                columns.append(column)
    return columns


BEST_SEPARATOR = " / "  # between tied names in the CSV's ``best`` row


def best_per_column(rows: list[ConfigResult], columns: list[str]) -> dict[str, list[str]]:
    """Per column, the configurations with the highest value as printed (2 decimals), so
    ties are all marked; none when several rows have values and all of them tie."""
    best: dict[str, list[str]] = {}
    for column in columns:
        shown = {
            row.name: round(row.metrics[column], 2)
            for row in rows
            if column in row.metrics and not math.isnan(row.metrics[column])
        }
        if not shown:
            continue
        top = max(shown.values())
        winners = [name for name, value in shown.items() if value == top]
        if len(shown) == 1 or len(winners) < len(shown):
            best[column] = winners
    return best


def _fmt(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.2f}"


def _sd(row: ConfigResult, column: str) -> str:
    """The standard deviation as printed; empty where it has none (a single run)."""
    return _fmt(row.spread[column]) if column in row.spread else ""


def _cell(row: ConfigResult, column: str) -> str:
    text = _fmt(row.metrics.get(column))
    sd = _sd(row, column)
    return f"{text} ± {sd}" if sd else text


def to_markdown(rows: list[ConfigResult], title: str | None = None) -> str:
    lines = [f"### {title}", ""] if title else []
    runs = max((row.runs for row in rows), default=1)
    if runs > 1:
        lines += [f"Mean ± sample standard deviation over {runs} runs (seeds or folds).", ""]
    return "\n".join(lines) + ("\n" if lines else "") + markdown_table(rows)


def markdown_table(rows: list[ConfigResult]) -> str:
    """The table alone: one row per configuration, the best value of each column in bold."""
    columns = ordered_columns(rows)
    best = best_per_column(rows, columns)
    lines = ["| configuration | " + " | ".join(columns) + " |"]
    lines.append("|---|" + "---:|" * len(columns))
    for row in rows:
        cells = []
        for column in columns:
            text = _cell(row, column)
            marked = row.name in best.get(column, []) and len(rows) > 1
            cells.append(f"**{text}**" if marked else text)
        lines.append(f"| {row.name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def to_csv(rows: list[ConfigResult]) -> str:
    columns = ordered_columns(rows)
    best = best_per_column(rows, columns)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    with_spread = any(row.runs > 1 for row in rows)
    sd_columns = [f"{c}{SD_SUFFIX}" for c in columns] if with_spread else []
    writer.writerow(["configuration", *columns, *sd_columns])
    for row in rows:
        values = [_fmt(row.metrics.get(c)) for c in columns]
        spreads = [_sd(row, c) for c in columns] if with_spread else []
        writer.writerow([row.name, *values, *spreads])
    names = [BEST_SEPARATOR.join(best.get(c, [])) for c in columns]
    writer.writerow(["best", *names, *([""] * len(sd_columns))])
    return buffer.getvalue()


SD_SUFFIX = " (sd)"


def rows_from_csv(text: str) -> list[ConfigResult]:
    """The rows of a ``report.csv`` (what `to_csv` wrote), as printed: 2 decimals.

    The CSV does not store the number of runs; rows with standard deviations get ``runs=2``,
    which is all that rendering needs."""
    table = list(csv.reader(io.StringIO(text)))
    if not table or table[0][:1] != ["configuration"]:
        raise ValueError("not a report.csv: its first column must be 'configuration'")
    header = table[0][1:]
    columns = [c for c in header if not c.endswith(SD_SUFFIX)]
    rows = []
    for line in table[1:]:
        if not line or line[0] == "best":
            continue
        cells = dict(zip(header, line[1:], strict=False))
        row = ConfigResult(line[0])
        for column in columns:
            if cells.get(column, "-") not in ("-", ""):
                row.metrics[column] = float(cells[column])
            sd = cells.get(column + SD_SUFFIX, "-")
            if sd not in ("-", ""):
                row.spread[column] = float(sd)
                row.runs = 2
        rows.append(row)
    return rows
