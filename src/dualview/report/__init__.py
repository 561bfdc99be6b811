"""Reports: paper-layout tables (Markdown, CSV) and plots (PNG) from evaluation results."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dualview.report.plots import loss_curves, metric_bars, pmrr_distributions
from dualview.report.table import ConfigResult, to_csv, to_markdown

__all__ = ["ConfigResult", "ReportFiles", "write_report"]


@dataclass
class ReportFiles:
    markdown: Path
    csv: Path
    plots: list[Path] = field(default_factory=list)


def write_report(rows: list[ConfigResult], out_dir: str | Path, title: str) -> ReportFiles:
    """Write ``report.md``, ``report.csv`` and the PNG plots into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plots = [
        metric_bars(rows, out / "metrics.png"),
        pmrr_distributions(rows, out / "pmrr_per_query.png"),
        loss_curves(rows, out / "loss.png"),
    ]
    made = [p for p in plots if p is not None]
    markdown = to_markdown(rows, title=title)
    if made:
        markdown += "\n" + "\n".join(f"![{p.stem}]({p.name})" for p in made) + "\n"
    (out / "report.md").write_text(markdown)
    (out / "report.csv").write_text(to_csv(rows))
    return ReportFiles(out / "report.md", out / "report.csv", made)
