from __future__ import annotations

import csv
import io
import math

from dualview.report import ConfigResult, write_report
from dualview.report.table import ordered_columns, to_csv, to_markdown


def _rows():
    return [
        ConfigResult(
            "base",
            {"MSMARCO nDCG@10": 40.0, "FollowIR p-MRR": -2.0},
            per_query={"demo": [-10.0, 0.0, 5.0]},
        ),
        ConfigResult(
            "Ins-DV",
            {"FollowIR p-MRR": 7.5, "MSMARCO nDCG@10": 38.0, "FollowIR Score": 20.0},
            per_query={"demo": [20.0, 40.0, -5.0]},
            loss_curve=[(1, 3.0), (2, 2.5), (3, 2.0)],
        ),
    ]


def test_columns_follow_paper_order_then_extras():
    assert ordered_columns(_rows()) == ["FollowIR p-MRR", "FollowIR Score", "MSMARCO nDCG@10"]


def test_markdown_marks_best_per_column():
    text = to_markdown(_rows())
    base_line = next(line for line in text.splitlines() if line.startswith("| base"))
    dv_line = next(line for line in text.splitlines() if line.startswith("| Ins-DV"))
    assert base_line == "| base | -2.00 | - | **40.00** |"
    assert dv_line == "| Ins-DV | **7.50** | **20.00** | 38.00 |"


def test_ties_are_all_marked_and_a_column_where_all_tie_is_not():
    rows = [
        ConfigResult("A", {"x": 100.0, "y": 5.004, "z": 1.0}),
        ConfigResult("B", {"x": 100.0, "y": 5.0, "z": 1.0}),
        ConfigResult("C", {"x": 90.0, "y": 4.0, "z": 1.0}),
    ]
    lines = to_markdown(rows).splitlines()
    assert "| A | **100.00** | **5.00** | 1.00 |" in lines
    assert "| B | **100.00** | **5.00** | 1.00 |" in lines
    assert "| C | 90.00 | 4.00 | 1.00 |" in lines
    best = list(csv.reader(io.StringIO(to_csv(rows))))[-1]
    assert best == ["best", "A / B", "A / B", ""]


def test_csv_has_best_row():
    rows = list(csv.reader(io.StringIO(to_csv(_rows()))))
    assert rows[0] == ["configuration", "FollowIR p-MRR", "FollowIR Score", "MSMARCO nDCG@10"]
    assert rows[-1] == ["best", "Ins-DV", "Ins-DV", "base"]


def test_write_report_makes_pngs(tmp_path):
    files = write_report(_rows(), tmp_path, title="demo")
    assert {p.name for p in files.plots} == {"metrics.png", "pmrr_per_query.png", "loss.png"}
    for plot in files.plots:
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert plot.stat().st_size > 5000
    assert "![metrics](metrics.png)" in files.markdown.read_text()


def test_aggregate_over_seeds_gives_mean_and_spread(tmp_path):
    from dualview.report.table import aggregate

    seed1 = [ConfigResult("A", {"m": 1.0, "a": 0.0}, {"b": [1.0]}, [(1, 2.0)])]
    seed2 = [ConfigResult("A", {"m": 3.0, "a": 0.0}, {"b": [5.0]}, [(1, 4.0)])]
    (row,) = aggregate([seed1, seed2])
    assert row.runs == 2 and row.metrics == {"m": 2.0, "a": 0.0}
    assert list(row.metrics) == ["m", "a"]  # column order as in the runs
    assert abs(row.spread["m"] - 2**0.5) < 1e-12
    assert row.per_query == {"b": [1.0, 5.0]} and row.loss_curve == [(1, 3.0)]
    assert "| A | 2.00 ± 1.41 | 0.00 ± 0.00 |" in to_markdown([row])
    header = to_csv([row]).splitlines()[0]
    assert header == "configuration,m,a,m (sd),a (sd)"


def test_seeds_aggregate_to_mean_and_sd_in_tables_and_plots(tmp_path):
    from dualview.report.table import aggregate

    seeds = [
        [
            ConfigResult("A", {"p-MRR": 10.0}, loss_curve=[(1, 2.0)]),
            ConfigResult("B", {"p-MRR": 4.0}),
        ],
        [
            ConfigResult("A", {"p-MRR": 14.0}, loss_curve=[(1, 4.0)]),
            ConfigResult("B", {"p-MRR": 6.0}),
        ],
    ]
    rows = aggregate(seeds)
    a = next(r for r in rows if r.name == "A")
    assert a.runs == 2 and a.metrics["p-MRR"] == 12.0 and a.loss_curve == [(1, 3.0)]
    assert math.isclose(a.spread["p-MRR"], math.sqrt(8.0))
    assert "| A | **12.00 ± 2.83** |" in to_markdown(rows).splitlines()
    files = write_report(rows, tmp_path, title="seeds")
    assert (tmp_path / "metrics.png").stat().st_size > 0 and files.markdown.exists()
