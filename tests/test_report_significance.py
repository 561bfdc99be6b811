"""Paired significance (randomization test, bootstrap CI, Holm) against scipy, and its use
in reports (seeds pooled by query, default pairs, table)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from dualview.errors import DualviewError
from dualview.report import ReportOptions, write_report
from dualview.report.compare import compare_rows, default_pairs, parse_pair, significance_markdown
from dualview.report.significance import (
    bootstrap_ci,
    compare,
    holm,
    paired_differences,
    randomization_p_value,
)
from dualview.report.table import ConfigResult, aggregate


def _scipy_p(d: np.ndarray, n_resamples: int) -> float:
    result = stats.permutation_test(
        (d,),
        lambda x, axis: np.mean(x, axis=axis),
        vectorized=True,
        permutation_type="samples",
        n_resamples=n_resamples,
        alternative="two-sided",
        random_state=0,
    )
    return float(result.pvalue)


@pytest.mark.parametrize("n, shift", [(8, 0.9), (12, 0.3), (14, 0.0)])
def test_exact_randomization_matches_scipy(n: int, shift: float) -> None:
    d = np.random.default_rng(n).normal(shift, 1.0, n)
    assert randomization_p_value(d, n_resamples=2**n) == pytest.approx(_scipy_p(d, 2**n), abs=1e-12)


def test_exact_randomization_with_ties_matches_scipy() -> None:
    # Pairwise accuracies take few values: many tied differences and zeros.
    d = np.array([0.0, 50.0, -50.0, 100.0, 50.0, 0.0, 50.0, -50.0, 100.0, 50.0, 0.0])
    assert randomization_p_value(d, 4096) == pytest.approx(_scipy_p(d, 4096), abs=1e-12)


def test_sampled_randomization_close_to_scipy() -> None:
    d = np.random.default_rng(3).normal(0.25, 1.0, 90)
    ours = randomization_p_value(d, n_resamples=20_000, seed=1)
    theirs = _scipy_p(d, 20_000)
    assert 0.005 < theirs < 0.5  # a p-value where sampling noise matters
    assert ours == pytest.approx(theirs, abs=0.015)


def test_bootstrap_ci_close_to_scipy_percentile() -> None:
    d = np.random.default_rng(9).normal(1.0, 2.0, 60)
    low, high = bootstrap_ci(d, n_resamples=20_000, seed=2)
    ci = stats.bootstrap(
        (d,), np.mean, method="percentile", n_resamples=20_000, random_state=3
    ).confidence_interval
    width = ci.high - ci.low
    assert low == pytest.approx(ci.low, abs=0.05 * width)
    assert high == pytest.approx(ci.high, abs=0.05 * width)
    assert low < d.mean() < high


def test_holm_step_down() -> None:
    # sorted 0.01, 0.02, 0.04, 0.3 -> x4, x3, x2, x1 = 0.04, 0.06, 0.08, 0.3 (monotone)
    assert holm([0.04, 0.01, 0.3, 0.02]) == pytest.approx([0.08, 0.04, 0.3, 0.06])
    assert holm([0.5, 0.2]) == pytest.approx([0.5, 0.4])  # made monotone
    adjusted = holm([0.01, float("nan")])
    assert adjusted[0] == pytest.approx(0.01) and math.isnan(adjusted[1])


def test_seeds_pooled_by_query_and_only_common_queries() -> None:
    arm = {"q1": [10.0, 20.0], "q2": [0.0], "q3": [5.0]}
    control = {"q1": [0.0, 0.0], "q2": [10.0], "q9": [1.0]}
    a, c = paired_differences(arm, control)
    assert a.tolist() == [15.0, 0.0] and c.tolist() == [0.0, 10.0]
    comp = compare("m", "A", "C", arm, control, n_resamples=1000)
    assert comp is not None and comp.n_queries == 2 and comp.diff == pytest.approx(2.5)


def _row(name: str, values: dict[str, float]) -> ConfigResult:
    row = ConfigResult(name, metrics={"paired p-MRR": float(np.mean(list(values.values())))})
    row.query_values["paired p-MRR"] = {q: [v] for q, v in values.items()}
    return row


def test_report_rows_compared_with_holm_and_marked() -> None:
    rng = np.random.default_rng(0)
    base_values = {f"q{i}": float(v) for i, v in enumerate(rng.normal(0, 10, 40))}
    better = {q: v + 8.0 + float(rng.normal(0, 2)) for q, v in base_values.items()}
    same = {q: v + float(rng.normal(0, 2)) for q, v in base_values.items()}
    seeds = [[_row("base", base_values), _row("Ins-orig", same), _row("Ins-DV", better)]] * 2
    rows = aggregate(seeds)
    assert rows[1].query_values["paired p-MRR"]["q0"] == [same["q0"], same["q0"]]
    comps = compare_rows(rows, n_resamples=2000)
    pairs = [(c.arm, c.control) for c in comps]
    assert pairs == [("Ins-DV", "Ins-orig"), ("Ins-orig", "base"), ("Ins-DV", "base")]
    by_pair = {(c.arm, c.control): c for c in comps}
    assert by_pair[("Ins-DV", "base")].significant
    assert not by_pair[("Ins-orig", "base")].significant
    assert all(c.p_holm is not None and c.p_holm >= c.p_value for c in comps)
    table = significance_markdown(comps, runs=2)
    assert "p (Holm)" in table and "| paired p-MRR | Ins-DV | base | 40 |" in table
    assert table.count(" * |") == sum(c.significant for c in comps)


def test_default_pairs_and_bad_names() -> None:
    assert default_pairs(["base", "Ins-orig", "orig+dv"]) == [
        ("orig+dv", "Ins-orig"),
        ("Ins-orig", "base"),
        ("orig+dv", "base"),
    ]
    assert default_pairs(["base", "A"]) == [("A", "base")]
    assert parse_pair("orig+dv:Ins-orig") == ("orig+dv", "Ins-orig")
    with pytest.raises(DualviewError, match="ARM:CONTROL"):
        parse_pair("just-one")
    with pytest.raises(DualviewError, match="no configuration 'nope'"):
        compare_rows([_row("A", {"q": 1.0})], [("A", "nope")])


def test_a_comparison_names_rows_that_hold_colons() -> None:
    """Eval-folder rows are named ``RERANKER@FIRST_STAGE`` and ``embedded:minilm``: ARM:CONTROL
    is split at the colon where both sides are rows."""
    values = {f"q{i}": float(i) for i in range(6)}
    names = ["embedded:minilm", "ce@embedded:minilm", "dv@embedded:minilm"]
    rows = [_row(n, {q: v + shift for q, v in values.items()}) for shift, n in enumerate(names)]
    pairs = [parse_pair("dv@embedded:minilm:ce@embedded:minilm")]
    pairs.append(parse_pair("ce@embedded:minilm:embedded:minilm"))
    comps = compare_rows(rows, pairs, n_resamples=200)
    assert [(c.arm, c.control) for c in comps] == [
        ("dv@embedded:minilm", "ce@embedded:minilm"),
        ("ce@embedded:minilm", "embedded:minilm"),
    ]
    assert [c.diff for c in comps] == [1.0, 1.0]
    with pytest.raises(DualviewError, match="no configuration 'dv@embedded'"):
        compare_rows(rows, [parse_pair("dv@embedded:minilm:nope")])


def test_a_report_keeps_only_the_metrics_asked_for(tmp_path) -> None:
    rng = np.random.default_rng(1)
    values = {f"q{i}": float(v) for i, v in enumerate(rng.normal(0, 10, 30))}
    rows = []
    for name, shift in (("base", 0.0), ("Ins-orig", 1.0), ("Ins-DV", 9.0)):
        row = _row(name, {q: v + shift for q, v in values.items()})
        row.metrics["phenomena p-MRR"] = row.metrics["paired p-MRR"] - 1
        row.query_values["phenomena p-MRR"] = {
            q: [v - 1] for q, [v] in row.query_values["paired p-MRR"].items()
        }
        row.metrics["beir nDCG@10"] = 50.0
        rows.append(row)
    full = write_report(rows, tmp_path / "all", "t", ReportOptions(n_resamples=200))
    kept = write_report(
        rows, tmp_path / "some", "t", ReportOptions(n_resamples=200, metrics=["phenomena"])
    )

    def significance(files) -> list[dict]:
        return json.loads(files.significance.read_text())

    assert {c["metric"] for c in significance(full)} == {"paired p-MRR", "phenomena p-MRR"}
    assert {c["metric"] for c in significance(kept)} == {"phenomena p-MRR"}
    header = kept.csv.read_text().splitlines()[0]
    assert "phenomena p-MRR" in header and "paired" not in header and "beir" not in header
    # Holm runs per metric: the kept metric's corrected p-values do not change
    holm = [
        [c["p_holm"] for c in significance(f) if c["metric"] == "phenomena p-MRR"]
        for f in (kept, full)
    ]
    assert holm[0] == holm[1]
