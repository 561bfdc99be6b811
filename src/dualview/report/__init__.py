"""Reports: paper-layout tables (Markdown, CSV) and plots (PNG) from evaluation results, with
paired significance (`dualview.report.compare`) and error analysis
(`dualview.report.flips`) of the configurations the report compares."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dualview.errors import DualviewError
from dualview.io.atomic import atomic_write_text
from dualview.io.paths import check_outputs
from dualview.report.compare import (
    check_pairs,
    compare_rows,
    default_pairs,
    is_base,
    significance_csv,
    significance_markdown,
    untested_metrics,
)
from dualview.report.flips import error_analysis
from dualview.report.plots import (
    difference_plot,
    loss_curves,
    metric_plot,
    pmrr_distributions,
)
from dualview.report.table import (
    ConfigResult,
    keep_metrics,
    metric_kept,
    to_csv,
    to_markdown,
)

__all__ = ["ConfigResult", "ReportFiles", "ReportOptions", "write_report"]


@dataclass
class ReportFiles:
    markdown: Path
    csv: Path
    plots: list[Path] = field(default_factory=list)
    significance: Path | None = None


@dataclass
class ReportOptions:
    """What a report compares beyond the table.

    ``comparisons``: ``(arm, control)`` pairs for the significance table (``None``: the
    default pairs of `dualview.report.compare.default_pairs`; empty: none).
    ``error_pairs``: ``(arm_a, arm_b)`` pairs for the flipped-query analysis (``None``: every
    trained arm against ``Ins-orig``, when there is one).
    ``sections``: extra ``(heading, markdown)`` sections appended as given (e.g. a human
    review summary).
    ``metrics``: metric name prefixes to keep (``["paired p-MRR", "phenomena"]``); the
    tables, comparisons and figures show only those metrics (empty: all); a prefix that no
    metric of the report starts with is an error. Holm's correction runs over each metric's
    comparisons, so it does not change with this choice; the error analysis still reads
    every metric it needs.
    ``read``: files the report read besides the results (verdict files): none of the
    report's files may be one of them.
    """

    comparisons: Sequence[tuple[str, str]] | None = None
    error_pairs: Sequence[tuple[str, str]] | None = None
    n_resamples: int = 10_000
    seed: int = 0
    flip_limit: int = 10
    sections: list[tuple[str, str]] = field(default_factory=list)
    metrics: Sequence[str] = ()
    read: Sequence[Path] = ()


#: the files `write_report` may write into its folder
REPORT_FILES = (
    "report.md",
    "report.csv",
    "significance.csv",
    "significance.json",
    "differences.png",
    "metrics.png",
    "pmrr_per_query.png",
    "loss.png",
)


def check_metric_prefixes(rows: list[ConfigResult], prefixes: Sequence[str]) -> None:
    """Raise a `DualviewError` for a prefix that no metric of ``rows`` starts with (a typo
    would otherwise give an empty or partial table)."""
    metrics = list(dict.fromkeys(m for row in rows for m in row.metrics))
    for prefix in prefixes:
        if not any(metric_kept(metric, [prefix]) for metric in metrics):
            known = ", ".join(metrics[:12]) + (", ..." if len(metrics) > 12 else "")
            raise DualviewError(
                f"--metrics {prefix!r}: no metric of this report starts with it "
                f"(metrics: {known or 'none'})"
            )


def write_report(
    rows: list[ConfigResult],
    out_dir: str | Path,
    title: str,
    options: ReportOptions | None = None,
) -> ReportFiles:
    """Write ``report.md``, ``report.csv``, ``significance.csv``/``.json`` and the PNG plots
    into ``out_dir``."""
    options = options or ReportOptions()
    out = Path(out_dir)
    check_metric_prefixes(rows, options.metrics)
    check_outputs([out / name for name in REPORT_FILES], options.read)
    every_metric, rows = rows, [keep_metrics(row, options.metrics) for row in rows]
    out.mkdir(parents=True, exist_ok=True)
    markdown = to_markdown(rows, title=title)
    comparisons = compare_rows(rows, options.comparisons, options.n_resamples, options.seed)
    plots = [  # the differences first: they are what the report is about
        difference_plot(comparisons, out / "differences.png"),
        metric_plot(rows, out / "metrics.png"),
        pmrr_distributions(rows, out / "pmrr_per_query.png"),
        loss_curves(rows, out / "loss.png"),
    ]
    made = [p for p in plots if p is not None]
    significance = None
    untested = untested_metrics(rows, comparisons, options.comparisons)
    if comparisons or untested:
        runs = max(row.runs for row in rows)
        markdown += "\n" + significance_markdown(comparisons, runs, untested)
    if comparisons:
        atomic_write_text(out / "significance.csv", significance_csv(comparisons))
        significance = out / "significance.json"
        payload = [c.to_dict() for c in comparisons]
        atomic_write_text(significance, json.dumps(payload, indent=1) + "\n")
    error_pairs = options.error_pairs
    if error_pairs is None:
        error_pairs = [p for p in default_pairs([r.name for r in rows]) if not is_base(p[1])]
    error_pairs = check_pairs(error_pairs, [r.name for r in rows])
    if error_pairs:
        # the flips read each query's pairwise accuracy, shown or not
        markdown += "\n" + error_analysis(every_metric, error_pairs, options.flip_limit)
    for heading, text in options.sections:
        markdown += f"\n### {heading}\n\n{text.rstrip()}\n"
    if made:
        markdown += "\n" + "\n".join(f"![{p.stem}]({p.name})" for p in made) + "\n"
    atomic_write_text(out / "report.md", markdown)
    atomic_write_text(out / "report.csv", to_csv(rows))
    return ReportFiles(out / "report.md", out / "report.csv", made, significance)
