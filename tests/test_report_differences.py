"""The difference figure: arm - control per metric, bootstrap CI as error bar, zero line,
significant differences marked; the first figure of report.md."""

from __future__ import annotations

import numpy as np
import pytest

from dualview.report import write_report
from dualview.report.plots import (
    COLORS,
    _comparison_label,
    _difference_panel,
    _pyplot,
    difference_plot,
)
from dualview.report.significance import PairedComparison
from dualview.report.table import ConfigResult


def _comp(metric: str, arm: str, diff: float, low: float, high: float, p: float):
    return PairedComparison(metric, arm, "base", 40, 10 + diff, 10.0, diff, low, high, p, None)


def test_panel_draws_ci_bars_zero_line_and_marks_significance() -> None:
    comps = [_comp("m", "A", 1.5, 0.4, 2.6, 0.01), _comp("m", "B", -0.3, -1.1, 0.5, 0.4)]
    plt = _pyplot()
    fig, ax = plt.subplots()
    _difference_panel(ax, comps)
    points = [line for line in ax.lines if line.get_marker() == "o"]
    assert [tuple(p.get_xdata()) for p in points] == [(1.5,), (-0.3,)]
    # error bar of each row spans exactly its CI
    spans = sorted(tuple(sorted(seg[:, 0])) for c in ax.collections for seg in c.get_segments())
    assert spans == [pytest.approx((-1.1, 0.5)), pytest.approx((0.4, 2.6))]
    assert any(tuple(line.get_xdata()) == (0, 0) for line in ax.lines)  # the zero line
    filled = [p.get_markerfacecolor() for p in points]
    assert filled == [COLORS[0], "white"]  # significant: filled in colour; else hollow
    labels = [t.get_text() for t in ax.texts]
    assert labels == ["+1.50 *", "-0.30"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["A - base", "B - base"]
    plt.close(fig)


def test_long_sweep_arm_labels_wrap_before_the_control() -> None:
    short = _comp("m", "Ins-DV", 1.0, 0.0, 2.0, 0.1)
    assert _comparison_label(short) == "Ins-DV - base"
    long = _comp("m", "Ins-DV-gold [model=cross-encoder]", 1.0, 0.0, 2.0, 0.1)
    assert _comparison_label(long) == "Ins-DV-gold [model=cross-encoder]\n- base"


def test_a_panel_of_zero_differences_gets_a_readable_axis() -> None:
    plt = _pyplot()
    fig, ax = plt.subplots()
    _difference_panel(ax, [_comp("Recall@100", "A", 0.0, 0.0, 0.0, 1.0)])
    assert ax.get_xlim() == (-1, 1)
    plt.close(fig)


def test_one_panel_per_metric_and_none_without_comparisons(tmp_path) -> None:
    comps = [_comp("p-MRR", "A", 1.0, 0.2, 1.8, 0.02), _comp("nDCG", "A", -0.5, -1.0, 0.1, 0.1)]
    path = difference_plot(comps, tmp_path / "d.png")
    assert path is not None and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert difference_plot([], tmp_path / "none.png") is None
    assert not (tmp_path / "none.png").exists()


def _row(name: str, shift: float, rng) -> ConfigResult:
    values = {f"q{i}": float(v) + shift for i, v in enumerate(rng.normal(0, 5, 30))}
    row = ConfigResult(name, metrics={"p-MRR": float(np.mean(list(values.values())))})
    row.query_values["p-MRR"] = {q: [v] for q, v in values.items()}
    return row


def test_report_puts_the_difference_figure_first(tmp_path) -> None:
    rows = [_row("base", 0, np.random.default_rng(0)), _row("Ins-DV", 3, np.random.default_rng(0))]
    files = write_report(rows, tmp_path, title="t")
    assert files.plots[0].name == "differences.png"
    text = files.markdown.read_text()
    figures = [line for line in text.splitlines() if line.startswith("![")]
    assert figures[0] == "![differences](differences.png)"
