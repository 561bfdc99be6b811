"""Report plots (matplotlib, PNG): paired differences with their CIs, metric bars, per-query
p-MRR distributions, loss curves."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

from dualview.io.atomic import atomic_path
from dualview.report.significance import PairedComparison
from dualview.report.table import ConfigResult, ordered_columns

# tab10, matplotlib's default cycle
COLORS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip
LABEL_CHARS = 36  # a difference panel's "arm - control" label wraps after this many characters


def _pyplot() -> Any:
    """matplotlib.pyplot on the file-only Agg backend (imported on first plot)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_png(fig: Any, path: Path) -> None:
    """Write ``fig`` as a 256-colour PNG, atomically: a plot has few colours, and the palette
    makes the file about 3x smaller than matplotlib's RGBA output at no visible cost."""
    from PIL import Image  # matplotlib's own dependency

    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=120, format="png")
    buffer.seek(0)
    with Image.open(buffer) as image:
        palette = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    with atomic_path(path) as tmp:
        palette.save(tmp, format="png", optimize=True)


def _grid(n: int, max_cols: int = 3) -> tuple[int, int]:
    cols = min(n, max_cols)
    return math.ceil(n / cols), cols


def _label_bars(ax, bars, values, errors=None) -> None:
    """The value above each bar (above its error bar, if any)."""
    errors = errors or [0.0] * len(values)
    for bar, value, error in zip(bars, values, errors, strict=True):
        if not math.isnan(value):
            ax.annotate(
                f"{value:.1f}",
                (bar.get_x() + bar.get_width() / 2, value + math.copysign(error, value)),
                ha="center",
                va="bottom" if value >= 0 else "top",
                fontsize=8,
            )


def _comparison_label(c: PairedComparison) -> str:
    """``arm - control``, on two lines when long (sweep arms carry their settings)."""
    one_line = f"{c.arm} - {c.control}"
    return one_line if len(one_line) <= LABEL_CHARS else f"{c.arm}\n- {c.control}"


def _difference_panel(ax, comparisons: list[PairedComparison]) -> None:
    """One row per arm - control: the mean difference, its 95% CI, a zero line; significant
    ones filled, in colour and starred, the others hollow and grey."""
    labels = [_comparison_label(c) for c in comparisons]
    for y, c in enumerate(comparisons):
        color = COLORS[3] if c.significant and c.diff < 0 else COLORS[0]
        color = color if c.significant else COLORS[7]
        ax.errorbar(
            c.diff,
            y,
            xerr=[[c.diff - c.ci_low], [c.ci_high - c.diff]],
            fmt="o",
            color=color,
            markerfacecolor=color if c.significant else "white",
            capsize=4,
            markersize=7,
        )
        ax.annotate(  # right of the CI, clear of the marker and the zero line
            f"{c.diff:+.2f}{' *' if c.significant else ''}",
            (c.ci_high, y),
            xytext=(5, 0),
            textcoords="offset points",
            ha="left",
            va="center",
            fontsize=8,
            color=color,
        )
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(comparisons)), labels, fontsize=8)
    ax.set_ylim(len(comparisons) - 0.5, -0.7)
    ax.margins(x=0.2)
    if max(max(abs(c.ci_low), abs(c.ci_high)) for c in comparisons) < 1e-9:
        ax.set_xlim(-1, 1)  # every difference is 0: a readable axis, not one of width 1e-17
    ax.grid(axis="x", alpha=0.3)
    ax.set_xlabel("difference (metric points)", fontsize=8)


def difference_plot(comparisons: list[PairedComparison], path: Path) -> Path | None:
    """One panel per metric: each arm minus its control, the bootstrap 95% CI as error bar,
    a zero line; significant differences (p < 0.05, Holm-corrected when applied) marked."""
    metrics = list(dict.fromkeys(c.metric for c in comparisons))
    if not metrics:
        return None
    plt = _pyplot()
    n_rows, n_cols = _grid(len(metrics), max_cols=2)
    height = 0.9 + 0.45 * max(sum(c.metric == m for c in comparisons) for m in metrics)
    label_chars = max(len(line) for c in comparisons for line in _comparison_label(c).split("\n"))
    panel_width = 3.4 + 0.065 * label_chars  # the plot area plus its y labels (8 pt)
    fig_height = height * n_rows + 0.6
    fig, axes = plt.subplots(
        n_rows, n_cols, figsize=(panel_width * n_cols, fig_height), squeeze=False
    )
    for ax, metric in zip(axes.flat, metrics, strict=False):
        _difference_panel(ax, [c for c in comparisons if c.metric == metric])
        ax.set_title(f"{metric}: arm - control", fontsize=10)
    for ax in list(axes.flat)[len(metrics) :]:
        ax.axis("off")
    holm = " after Holm" if any(c.p_holm is not None for c in comparisons) else ""
    fig.suptitle(
        f"Paired differences, 95% bootstrap CI; filled and * = p < 0.05{holm}", fontsize=10
    )
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / fig_height))  # keep the suptitle clear
    save_png(fig, path)
    plt.close(fig)
    return path


def metric_bars(rows: list[ConfigResult], path: Path) -> Path | None:
    """One panel per metric column, one bar per configuration; over several runs (seeds)
    the bar is the mean and the error bar one standard deviation."""
    columns = ordered_columns(rows)
    if not columns:
        return None
    plt = _pyplot()
    n_rows, n_cols = _grid(len(columns))
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(4.2 * n_cols, 3.4 * n_rows), squeeze=False)
    names = [row.name for row in rows]
    for ax, column in zip(axes.flat, columns, strict=False):
        values = [row.metrics.get(column, float("nan")) for row in rows]
        spread = [row.spread.get(column, 0.0) if row.runs > 1 else 0.0 for row in rows]
        bars = ax.bar(
            range(len(rows)),
            values,
            color=[COLORS[i % 10] for i in range(len(rows))],
            yerr=spread if any(spread) else None,
            capsize=4,
        )
        _label_bars(ax, bars, values, spread)
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_title(column, fontsize=10)
        ax.set_xticks(range(len(rows)), names, rotation=20, ha="right", fontsize=8)
        ax.margins(y=0.18)
    for ax in list(axes.flat)[len(columns) :]:
        ax.axis("off")
    runs = max((row.runs for row in rows), default=1)
    over = f"; mean ± sd over {runs} runs" if runs > 1 else ""
    fig.suptitle(f"Metrics per configuration (higher is better{over})")
    fig.tight_layout()
    save_png(fig, path)
    plt.close(fig)
    return path


def pmrr_distributions(rows: list[ConfigResult], path: Path) -> Path | None:
    """Per-query p-MRR as box plots: one panel per benchmark, one box per configuration."""
    benchmarks = sorted({b for row in rows for b in row.per_query})
    if not benchmarks:
        return None
    plt = _pyplot()
    n_rows, n_cols = _grid(len(benchmarks), max_cols=2)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(5.5 * n_cols, 3.8 * n_rows), squeeze=False)
    for ax, bench in zip(axes.flat, benchmarks, strict=False):
        data = [row.per_query.get(bench, []) for row in rows]
        ax.boxplot(data, showmeans=True)
        for i, values in enumerate(data, start=1):
            jitter = [i + ((k % 7) - 3) * 0.03 for k in range(len(values))]
            ax.scatter(jitter, values, s=6, alpha=0.4, color=COLORS[(i - 1) % 10])
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_title(f"{bench}: p-MRR per query (x100)", fontsize=10)
        ax.set_xticks(range(1, len(rows) + 1), [r.name for r in rows], rotation=20, ha="right")
        ax.set_ylim(-105, 105)
    for ax in list(axes.flat)[len(benchmarks) :]:
        ax.axis("off")
    fig.tight_layout()
    save_png(fig, path)
    plt.close(fig)
    return path


def loss_curves(rows: list[ConfigResult], path: Path, smooth: int = 10) -> Path | None:
    """Training loss per step (raw, faint) and its moving average, one line per config."""
    curves = [(row.name, row.loss_curve) for row in rows if row.loss_curve]
    if not curves:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, (name, curve) in enumerate(curves):
        steps = [s for s, _ in curve]
        losses = [v for _, v in curve]
        color = COLORS[i % 10]
        ax.plot(steps, losses, color=color, alpha=0.25, linewidth=0.8)
        window = max(1, min(smooth, len(losses) // 5 or 1))
        averaged = [
            sum(losses[max(0, k - window + 1) : k + 1])
            / len(losses[max(0, k - window + 1) : k + 1])
            for k in range(len(losses))
        ]
        ax.plot(steps, averaged, color=color, linewidth=1.8, label=name)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.set_title("Training loss")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_png(fig, path)
    plt.close(fig)
    return path
