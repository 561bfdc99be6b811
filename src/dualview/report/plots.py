"""Report plots (matplotlib, PNG): paired differences with their CIs, metric bars, per-query
p-MRR distributions, loss curves."""

from __future__ import annotations

import io
import math
import textwrap
from pathlib import Path
from typing import Any

from dualview.io.atomic import atomic_path
from dualview.report.significance import PairedComparison, bootstrap_ci, pooled_by_query
from dualview.report.table import ConfigResult, ordered_columns

# tab10, matplotlib's default cycle
COLORS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip
LABEL_CHARS = 36  # a difference panel's "arm - control" label wraps after this many characters
ROW_CHARS = 64  # a configuration name wraps after this many characters (once per panel row)
FIGURE_RESAMPLES = 2_000  # bootstrap resamples of a figure's CI (the tables' tests use more)


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


def _suptitle(fig: Any, text: str, fontsize: float = 9) -> None:
    """The figure's title, each line wrapped to the figure's width (never cut off)."""
    chars = max(40, int(fig.get_figwidth() * 72 / (0.55 * fontsize)))
    lines = [part for line in text.split("\n") for part in textwrap.wrap(line, chars)]
    fig.suptitle("\n".join(lines), fontsize=fontsize)


def _few_ticks(axis: Any) -> None:
    """At most about 6 tick labels on a value axis, so narrow panels stay legible."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10]))


def _grid(n: int, max_cols: int = 3) -> tuple[int, int]:
    cols = min(n, max_cols)
    return math.ceil(n / cols), cols


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
    _few_ticks(ax.xaxis)
    ax.grid(axis="x", alpha=0.3)
    ax.set_xlabel("arm - control (points of the table's x100 scale)", fontsize=8)


def difference_figure(comparisons: list[PairedComparison]) -> Any | None:
    """`difference_plot`'s figure (None without comparisons)."""
    metrics = list(dict.fromkeys(c.metric for c in comparisons))
    if not metrics:
        return None
    plt = _pyplot()
    n_rows, n_cols = _grid(len(metrics), max_cols=2)
    height = 1.1 + 0.45 * max(sum(c.metric == m for c in comparisons) for m in metrics)
    label_chars = max(len(line) for c in comparisons for line in _comparison_label(c).split("\n"))
    panel_width = 3.4 + 0.065 * label_chars  # the plot area plus its y labels (8 pt)
    size = (max(panel_width * n_cols, 6.5), height * n_rows + 0.7)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=size, squeeze=False, layout="constrained")
    for ax, metric in zip(axes.flat, metrics, strict=False):
        _difference_panel(ax, [c for c in comparisons if c.metric == metric])
        ax.set_title(f"{metric}: arm - control", fontsize=10)
    for ax in list(axes.flat)[len(metrics) :]:
        ax.axis("off")
    holm = " after Holm's correction" if any(c.p_holm is not None for c in comparisons) else ""
    _suptitle(
        fig,
        "Paired differences (arm - control, same queries): dot = mean difference, line = its "
        f"95% bootstrap CI; filled, coloured and * = p < 0.05{holm}; hollow grey = not "
        "significant; right of 0: the arm scores higher",
    )
    return fig


def difference_plot(comparisons: list[PairedComparison], path: Path) -> Path | None:
    """One panel per metric: each arm minus its control, the bootstrap 95% CI as error bar,
    a zero line; significant differences (p < 0.05, Holm-corrected when applied) marked."""
    return _save_figure(difference_figure(comparisons), path)


def axis_label(metric: str) -> str:
    """The x or y label of a metric's values: the scale the table shows them on (x100)."""
    if "p-MRR" in metric:
        return "p-MRR x100 (-100 to +100; 0 = ranks unchanged)"
    return "x100 (0 to 100)"


def _wrapped(name: str, width: int = LABEL_CHARS) -> str:
    """A configuration name on lines of at most ``width`` characters (long sweep labels
    and model paths stay readable as tick labels)."""
    return "\n".join(textwrap.wrap(name, width, break_on_hyphens=False)) or name


def _interval(row: ConfigResult, column: str) -> tuple[float, float, str] | None:
    """The interval drawn around a row's value: the 95% bootstrap CI of the mean over its
    queries (each query's runs averaged first), else +- one sd over runs, else none; with
    the legend's word for it."""
    values = list(pooled_by_query(row.query_values.get(column, {})).values())
    if len(values) > 1:
        low, high = bootstrap_ci(values, n_resamples=FIGURE_RESAMPLES)
        return low, high, "ci"
    value, sd = row.metrics.get(column, float("nan")), row.spread.get(column)
    if sd is not None and row.runs > 1:
        return value - sd, value + sd, "sd"
    return None


def _metric_panel(ax, rows: list[ConfigResult], column: str) -> set[str]:
    """One row per configuration: its value as a dot (the configuration's colour) with its
    interval (`_interval`) and the value as printed; the x axis from the data (not from 0).
    The kinds of interval drawn."""
    kinds = set()
    for y, row in enumerate(rows):
        value = row.metrics.get(column, float("nan"))
        if math.isnan(value):
            continue
        interval = _interval(row, column)
        xerr = None
        if interval is not None:
            low, high, kind = interval
            kinds.add(kind)
            xerr = [[max(value - low, 0.0)], [max(high - value, 0.0)]]
        color = COLORS[y % 10]
        ax.errorbar(value, y, xerr=xerr, fmt="o", color=color, capsize=4, markersize=7)
        right = value if interval is None else max(value, interval[1])
        ax.annotate(
            f"{value:.2f}",
            (right, y),
            xytext=(5, 0),
            textcoords="offset points",
            ha="left",
            va="center",
            fontsize=8,
        )
    ax.set_yticks(range(len(rows)), [_wrapped(r.name, ROW_CHARS) for r in rows], fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.margins(x=0.25)
    ax.grid(axis="x", alpha=0.3)
    _few_ticks(ax.xaxis)
    ax.set_title(column, fontsize=10)
    ax.set_xlabel(axis_label(column), fontsize=8)
    return kinds


INTERVAL_NOTES = {
    "ci": "line: 95% bootstrap CI of the mean over queries",
    "sd": "line: +- 1 sd over runs (no per-query values)",
}


def metric_figure(rows: list[ConfigResult]) -> Any | None:
    """`metric_plot`'s figure (None without metrics)."""
    columns = ordered_columns(rows)
    if not columns:
        return None
    plt = _pyplot()
    n_rows, n_cols = _grid(len(columns))
    label_chars = max(min(len(r.name), ROW_CHARS) for r in rows)
    lines = max(_wrapped(r.name, ROW_CHARS).count("\n") + 1 for r in rows)
    row_height = 0.12 + 0.14 * lines  # inches per configuration
    size = (
        max(0.065 * label_chars + 3.2 * n_cols, 6.5),
        (1.0 + row_height * len(rows)) * n_rows + 0.7,
    )
    # the panels of a row share their configurations: their names once, on the left
    fig, axes = plt.subplots(
        n_rows, n_cols, figsize=size, squeeze=False, sharey="row", layout="constrained"
    )
    kinds: set[str] = set()
    for ax, column in zip(axes.flat, columns, strict=False):
        kinds |= _metric_panel(ax, rows, column)
    for ax in list(axes.flat)[len(columns) :]:
        ax.axis("off")
    runs = max((row.runs for row in rows), default=1)
    dot = (
        f"dot: the table's value (mean over {runs} runs)" if runs > 1 else "dot: the table's value"
    )
    notes = [dot, *(INTERVAL_NOTES[k] for k in ("ci", "sd") if k in kinds)]
    _suptitle(
        fig,
        "Metrics per configuration (higher is better; each axis zoomed to its values, "
        "not from 0)\n" + "; ".join(notes),
    )
    return fig


def metric_plot(rows: list[ConfigResult], path: Path) -> Path | None:
    """One panel per metric column, one dot per configuration with its 95% CI over queries
    (or +- sd over runs), on an axis zoomed to the values: small differences stay visible."""
    return _save_figure(metric_figure(rows), path)


def _save_figure(fig: Any | None, path: Path) -> Path | None:
    """Write ``fig`` (`save_png`) and close it; None when there is no figure."""
    if fig is None:
        return None
    save_png(fig, path)
    _pyplot().close(fig)
    return path


def _pmrr_limits(data: list[list[float]]) -> tuple[float, float]:
    """A y range from the values, always showing 0 (ranks unchanged), within -105..105."""
    values = [v for d in data for v in d] or [0.0]
    low, high = min(min(values), 0.0), max(max(values), 0.0)
    pad = max(5.0, 0.08 * (high - low))
    return max(low - pad, -105.0), min(high + pad, 105.0)


def _counted(rows: list[ConfigResult], data: list[list[float]]) -> str:
    """How many values a box holds: queries, or queries x runs over several runs (seeds)."""
    values = max((len(d) for d in data), default=0)
    runs = max((row.runs for row in rows), default=1)
    if runs > 1 and values % runs == 0:
        return f"{values // runs} queries x {runs} runs"
    return f"{values} queries" if runs == 1 else f"{values} query values over {runs} runs"


def _pmrr_panel(ax, rows: list[ConfigResult], bench: str) -> None:
    """Box plot per configuration of its queries' p-MRR: the box the middle half, the
    median a thick black line, the mean a white diamond, each query a dot in the
    configuration's colour; a dashed zero line behind."""
    data = [row.per_query.get(bench, []) for row in rows]
    ax.axhline(0, color="grey", linewidth=0.8, linestyle="--", zorder=0)
    ax.boxplot(
        data,
        showmeans=True,
        showfliers=False,
        medianprops={"color": "black", "linewidth": 2.2},
        meanprops={"marker": "D", "markerfacecolor": "white", "markeredgecolor": "black"},
        zorder=2,
    )
    for i, values in enumerate(data, start=1):
        jitter = [i + ((k % 7) - 3) * 0.03 for k in range(len(values))]
        ax.scatter(jitter, values, s=7, alpha=0.45, color=COLORS[(i - 1) % 10], zorder=3)
    ax.set_title(f"{bench}: p-MRR per query ({_counted(rows, data)})", fontsize=10)
    ax.set_xticks(range(1, len(rows) + 1), [_wrapped(r.name, 24) for r in rows], fontsize=8)
    ax.set_ylabel(axis_label("p-MRR"), fontsize=8)
    ax.set_ylim(*_pmrr_limits(data))


def _pmrr_legend(fig) -> None:
    """What the box plot's marks mean, once for the figure."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [
        Patch(facecolor="white", edgecolor="black", label="box: middle half of the queries"),
        Line2D([], [], color="black", linewidth=2.2, label="median"),
        Line2D(
            [], [], marker="D", color="black", markerfacecolor="white", linestyle="", label="mean"
        ),
        Line2D(
            [],
            [],
            marker="o",
            color="grey",
            alpha=0.6,
            linestyle="",
            markersize=4,
            label="one query",
        ),
        Line2D([], [], color="black", label="whiskers: queries within 1.5 box heights"),
        Line2D([], [], color="grey", linestyle="--", label="0: ranks unchanged"),
    ]
    columns = max(1, min(3, int(fig.get_figwidth() / 2.9)))  # each entry fits
    fig.legend(
        handles=handles, loc="outside lower center", ncols=columns, fontsize=8, frameon=False
    )


def pmrr_figure(rows: list[ConfigResult]) -> Any | None:
    """`pmrr_distributions`' figure (None without per-query p-MRR)."""
    benchmarks = sorted({b for row in rows for b in row.per_query})
    if not benchmarks:
        return None
    plt = _pyplot()
    n_rows, n_cols = _grid(len(benchmarks), max_cols=2)
    width = max(6.0, 1.3 * len(rows) + 1.5)
    size = (width * n_cols, 3.8 * n_rows + 0.9)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=size, squeeze=False, layout="constrained")
    for ax, bench in zip(axes.flat, benchmarks, strict=False):
        _pmrr_panel(ax, rows, bench)
    for ax in list(axes.flat)[len(benchmarks) :]:
        ax.axis("off")
    _suptitle(fig, "How p-MRR is spread over the queries (higher is better)", fontsize=10)
    _pmrr_legend(fig)
    return fig


def pmrr_distributions(rows: list[ConfigResult], path: Path) -> Path | None:
    """Per-query p-MRR as box plots: one panel per benchmark, one box per configuration."""
    return _save_figure(pmrr_figure(rows), path)


def moving_average(values: list[float], window: int) -> list[float]:
    """Each value's mean with the ``window - 1`` values before it (fewer at the start)."""
    return [
        sum(values[max(0, k - window + 1) : k + 1]) / len(values[max(0, k - window + 1) : k + 1])
        for k in range(len(values))
    ]


def loss_figure(rows: list[ConfigResult], smooth: int = 10) -> Any | None:
    """`loss_curves`' figure (None when no row has a loss curve)."""
    curves = [(row.name, row.loss_curve) for row in rows if row.loss_curve]
    if not curves:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
    windows = []
    for i, (name, curve) in enumerate(curves):
        steps, losses = [s for s, _ in curve], [v for _, v in curve]
        color = COLORS[i % 10]
        window = max(1, min(smooth, len(losses) // 5 or 1))
        windows.append(window)
        if window > 1:
            ax.plot(steps, losses, color=color, alpha=0.25, linewidth=0.8)
        ax.plot(steps, moving_average(losses, window), color=color, linewidth=1.8, label=name)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("training step (optimizer updates)")
    ax.set_ylabel("training loss (the objective's value; lower is better)")
    smoothing = (
        f"\nsolid: moving average over {max(windows)} steps; faint: each step"
        if max(windows) > 1
        else ""
    )
    runs = max((row.runs for row in rows), default=1)
    mean = f", mean over {runs} runs" if runs > 1 else ""
    ax.set_title(f"Training loss per step{mean}{smoothing}", fontsize=10)
    ax.legend(title="configuration", fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def loss_curves(rows: list[ConfigResult], path: Path, smooth: int = 10) -> Path | None:
    """Training loss per step (raw, faint) and its moving average, one line per config."""
    return _save_figure(loss_figure(rows, smooth), path)
