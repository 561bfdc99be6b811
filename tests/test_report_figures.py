"""Issue 34 item 16: every report figure reads without its author: titles that name the
benchmark once, labelled axes on the table's scale, a legend for every mark, axes from the
data (13.5 vs 14.5 must be visible), nothing cut off. The figures are caught as
`write_report` saves them, so the same test reads the figures of any version of the code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex

from dualview.report import ReportOptions, plots, write_report
from dualview.report.collect import eval_file_row
from dualview.report.significance import bootstrap_ci

MEANS = {"base": 14.5, "Ins-orig": 14.5, "Ins-DV": 13.5}  # the demo's FollowIR p-MRR
QUERIES = 20


def _result(tmp_path: Path, name: str, mean: float, seed: int) -> Path:
    """A `dualview eval` result of a one-set FollowIR folder named ``followir`` (as the
    demo's), its per-query p-MRR centred on ``mean``."""
    rng = np.random.default_rng(seed)
    pmrr = rng.normal(0, 8, QUERIES)
    pmrr = {f"q{i}": float(v) for i, v in enumerate(pmrr - pmrr.mean() + mean)}
    score = {f"q{i}": float(v) for i, v in enumerate(rng.uniform(0.6, 0.9, QUERIES))}
    mean_score = sum(score.values()) / QUERIES
    payload = {
        "benchmark": {"name": "followir", "label": "followir", "files": []},
        "model": {"name": name},
        "metrics": {"followir/p-MRR": mean, "p-MRR": mean, "followir/Score": mean_score},
        "per_query": {"followir/p-MRR": pmrr, "followir/Score": score},
    }
    payload["metrics"]["Score"] = mean_score
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(payload))
    return path


def _report_figures(tmp_path: Path, options: ReportOptions) -> dict[str, Any]:
    """File name -> the matplotlib figure `write_report` saved under it, and the rows."""
    rows = []
    for seed, (name, mean) in enumerate(MEANS.items()):
        rows.append(eval_file_row(name, _result(tmp_path, name, mean, seed)))
    for k, row in enumerate(rows[1:]):
        row.loss_curve = [(s, 2.0 / s + 0.1 * k + 0.05 * (s % 3)) for s in range(1, 41)]
    caught: dict[str, Any] = {"rows": rows}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plots, "save_png", lambda fig, path: caught.setdefault(path.name, fig))
        write_report(rows, tmp_path / "report", "t", options)
    return caught


@pytest.fixture(scope="module")
def figures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    options = ReportOptions(comparisons=[("Ins-DV", "Ins-orig")], error_pairs=[], n_resamples=500)
    return _report_figures(tmp_path_factory.mktemp("figures"), options)


@pytest.fixture(scope="module")
def one_metric(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A report of one metric: one narrow panel under the figure's title."""
    options = ReportOptions(comparisons=[], error_pairs=[], metrics=["FollowIR p-MRR"])
    return _report_figures(tmp_path_factory.mktemp("one-metric"), options)


@pytest.mark.parametrize(
    ("report", "name"),
    [
        ("figures", "differences.png"),
        ("figures", "metrics.png"),
        ("figures", "pmrr_per_query.png"),
        ("figures", "loss.png"),
        ("one_metric", "metrics.png"),
    ],
)
def test_no_text_is_cut_off(report: str, name: str, request: pytest.FixtureRequest) -> None:
    """Every panel with its titles, labels and drawn tick labels, the figure's title and
    legends lie inside the image."""
    fig = request.getfixturevalue(report)[name]
    renderer = FigureCanvasAgg(fig).get_renderer()  # the figure was closed after saving
    fig.draw(renderer)
    boxes = [(ax.get_title(), ax.get_tightbbox(renderer)) for ax in fig.axes if ax.axison]
    boxes += [("suptitle", fig._suptitle.get_window_extent(renderer))] if fig._suptitle else []
    boxes += [("legend", legend.get_window_extent(renderer)) for legend in fig.legends]
    width, height = fig.bbox.width, fig.bbox.height
    for what, box in boxes:
        inside = box.x0 >= -1 and box.y0 >= -1 and box.x1 <= width + 1 and box.y1 <= height + 1
        assert inside, f"{name}: {what!r} is cut off ({box} in {width}x{height})"


def test_pmrr_figure_names_the_benchmark_once_and_explains_its_marks(
    figures: dict[str, Any],
) -> None:
    fig = figures["pmrr_per_query.png"]
    [ax] = [ax for ax in fig.axes if ax.get_visible() and ax.has_data()]
    assert ax.get_title().startswith("followir: p-MRR per query")
    assert "followir followir" not in ax.get_title()
    assert "p-MRR" in ax.get_ylabel()
    low, high = ax.get_ylim()  # from the data (about -10..40), still showing 0
    assert -40 < low <= 0 < high < 70
    legends = [*fig.legends, *filter(None, [ax.get_legend()])]
    labels = {t.get_text() for legend in legends for t in legend.get_texts()}
    assert {"mean", "median"} <= labels
    configuration_colours = {to_hex(c) for c in plots.COLORS[: len(MEANS)]}
    means = [line for line in ax.lines if line.get_marker() not in ("None", None, "", "o")]
    assert means and all(
        to_hex(m.get_markerfacecolor()) not in configuration_colours for m in means
    )
    zero = [line for line in ax.lines if list(line.get_ydata()) == [0, 0]]
    assert zero and all(line.get_linestyle() != "-" for line in zero)  # not a median's look


def _value_axis(ax: Any) -> tuple[tuple[float, float], str]:
    """The limits and label of the axis carrying the values (the other names rows)."""
    names = {t.get_text() for t in ax.get_yticklabels()}
    if names & set(MEANS):
        return ax.get_xlim(), ax.get_xlabel()
    return ax.get_ylim(), ax.get_ylabel()


def test_metrics_zoom_to_the_values_with_their_confidence_intervals(
    figures: dict[str, Any],
) -> None:
    fig = figures["metrics.png"]
    panels = {ax.get_title(): ax for ax in fig.axes if ax.has_data()}
    assert set(panels) == {"FollowIR p-MRR", "FollowIR Score"}
    (low, high), label = _value_axis(panels["FollowIR p-MRR"])
    assert 5 < low < 13.5 and 14.5 < high < 25  # 13.5 vs 14.5 visible: not drawn from 0
    assert "x100" in label
    # Ins-DV's interval is the 95% bootstrap CI of its queries' mean
    row = figures["rows"][2]
    values = [v[0] for v in row.query_values["FollowIR p-MRR"].values()]
    ci = bootstrap_ci(values, n_resamples=plots.FIGURE_RESAMPLES)
    spans = [
        sorted(seg[:, 0]) for c in panels["FollowIR p-MRR"].collections for seg in c.get_segments()
    ]
    assert pytest.approx(list(ci)) in spans
    assert "95% bootstrap CI" in fig.get_suptitle()


def test_differences_and_loss_say_what_they_show(figures: dict[str, Any]) -> None:
    diff = figures["differences.png"]
    assert "hollow" in diff.get_suptitle() and "95% bootstrap CI" in diff.get_suptitle()
    assert all(ax.get_xlabel() for ax in diff.axes if ax.has_data())
    [loss] = figures["loss.png"].axes
    assert loss.get_xlabel().startswith("training step") and "loss" in loss.get_ylabel()
    assert "moving average" in loss.get_title()
    assert loss.get_legend() is not None
