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
from dataclasses import dataclass, field

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


def ordered_columns(rows: list[ConfigResult]) -> list[str]:
    present = {c for row in rows for c in row.metrics}
    columns = [c for c in PAPER_COLUMNS if c in present]
    for row in rows:
        for column in row.metrics:
            if column not in columns:
                columns.append(column)
    return columns


def best_per_column(rows: list[ConfigResult], columns: list[str]) -> dict[str, str]:
    best: dict[str, str] = {}
    for column in columns:
        scored = [
            (row.metrics[column], row.name)
            for row in rows
            if column in row.metrics and not math.isnan(row.metrics[column])
        ]
        if scored:
            best[column] = max(scored)[1]
    return best


def _fmt(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.2f}"


def to_markdown(rows: list[ConfigResult], title: str | None = None) -> str:
    columns = ordered_columns(rows)
    best = best_per_column(rows, columns)
    lines = [f"### {title}", ""] if title else []
    lines.append("| configuration | " + " | ".join(columns) + " |")
    lines.append("|---|" + "---:|" * len(columns))
    for row in rows:
        cells = []
        for column in columns:
            text = _fmt(row.metrics.get(column))
            cells.append(f"**{text}**" if best.get(column) == row.name and len(rows) > 1 else text)
        lines.append(f"| {row.name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def to_csv(rows: list[ConfigResult]) -> str:
    columns = ordered_columns(rows)
    best = best_per_column(rows, columns)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["configuration", *columns])
    for row in rows:
        writer.writerow([row.name, *(_fmt(row.metrics.get(c)) for c in columns)])
    writer.writerow(["best", *(best.get(c, "") for c in columns)])
    return buffer.getvalue()
