"""Interpolating a reranker's scores with its first stage's (`dualview.retrieval.fusion`,
``dualview eval --interpolate W``): the math by hand, the reranked order, the columns and
records of `evaluate`, the reranker scored once for every weight, and the errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dualview.errors import DualviewError
from dualview.eval.benchmarks import load_benchmark
from dualview.eval.benchmarks.base import EvalContext
from dualview.eval.interpolation import choose_weight, read_values
from dualview.eval.run import evaluate
from dualview.eval.two_stage import RerankSettings, reranked_name
from dualview.retrieval.fusion import check_weight, interpolate, min_max
from dualview.retrieval.rerank import CachedReranker, ranked, rerank_top_k
from tests.test_eval_rerank import FIX, Overlap, Table, save_overlap, write_pairs


def test_min_max_and_the_convex_combination_by_hand() -> None:
    assert min_max({"a": 2.0, "b": 4.0, "c": 3.0}) == {"a": 0.0, "b": 1.0, "c": 0.5}
    assert min_max({"a": 7.0, "b": 7.0}) == {"a": 0.0, "b": 0.0}  # no spread: no say
    assert min_max({}) == {}
    first = {"d1": 3.0, "d2": 2.0, "d3": 1.0, "d4": 0.0}  # d4: not reranked, not fused
    second = {"d1": 0.0, "d2": 10.0, "d3": 5.0}
    # mm(first) over d1..d3 = 1, .5, 0; mm(second) = 0, 1, .5
    assert interpolate(first, second, 0.5) == pytest.approx({"d1": 0.5, "d2": 0.75, "d3": 0.25})
    assert interpolate(first, second, 1.0) == pytest.approx({"d1": 0.0, "d2": 1.0, "d3": 0.5})
    assert interpolate(first, second, 0.2) == pytest.approx({"d1": 0.8, "d2": 0.6, "d3": 0.1})
    with pytest.raises(DualviewError, match="'d9' has no first-stage score"):
        interpolate(first, {"d9": 1.0}, 0.5)


@pytest.mark.parametrize("weight", [0.0, -0.1, 1.5, float("nan")])
def test_a_weight_outside_zero_to_one_is_an_error(weight: float) -> None:
    with pytest.raises(DualviewError, match=r"in \(0, 1\]"):
        check_weight(weight)


@pytest.mark.parametrize(
    ("weight", "order"),
    [
        (1.0, ["d2", "d3", "d1", "d4"]),
        (0.5, ["d2", "d1", "d3", "d4"]),
        (0.2, ["d1", "d2", "d3", "d4"]),
    ],
)
def test_the_top_k_is_ordered_by_the_fused_scores(weight: float, order: list[str]) -> None:
    first = {"q": {"d1": 3.0, "d2": 2.0, "d3": 1.0, "d4": 0.0}}
    texts = {"d1": "one", "d2": "two", "d3": "three", "d4": "four"}
    table = CachedReranker(Table({"one": 0.0, "two": 10.0, "three": 5.0}), cache=False)
    new = rerank_top_k(first, {"q": "x"}, texts.__getitem__, table, 3, weight)
    assert ranked(new["q"]) == order  # d4, beyond k, stays last


def test_paired_metrics_move_from_the_first_stage_to_the_reranker_with_the_weight(
    tmp_path: Path,
) -> None:
    """BM25 gets every pair (p-MRR +50); a reranker reversing its top 2 gets -50. Over two
    documents min-max gives each stage 0 and 1, so below w = 0.5 BM25's order stands and
    above it the reranker's."""
    bench = load_benchmark(f"paired={write_pairs(tmp_path / 'pairs')}")
    reverse = CachedReranker(Overlap(sign=-1.0), cache=False)
    expected = {0.4: 50.0, 0.6: -50.0, 1.0: -50.0}
    for weight, p_mrr in expected.items():
        ctx = EvalContext(first_stage="bm25", reranker=reverse, top_k=2, weight=weight)
        assert bench.evaluate(ctx).metrics["p-MRR"] == pytest.approx(p_mrr), weight


def test_evaluate_gives_a_column_per_weight_and_scores_each_pair_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DUALVIEW_CACHE", str(tmp_path / "cache"))
    pairs = write_pairs(tmp_path / "pairs")
    specs = [f"paired={pairs}", f"followir={FIX / 'followir'}"]
    reranker = Overlap(sign=-1.0, name="rev")
    settings = RerankSettings([reranker], "bm25", top_k=2, weights=[1.0, 0.4])
    summary = evaluate([], specs, tmp_path / "out", rerank=settings)
    assert summary.models == ["rev@bm25", "rev~0.4@bm25"]
    assert summary.values["rev@bm25"]["paired"]["p-MRR"] == pytest.approx(-50.0)
    assert summary.values["rev~0.4@bm25"]["paired"]["p-MRR"] == pytest.approx(50.0)
    seen = len(reranker.seen)
    assert seen == len(set(reranker.seen))  # the second weight read every score back

    plain = json.loads((tmp_path / "out" / "rev@bm25" / "paired.json").read_text())
    fused = json.loads((tmp_path / "out" / "rev_0.4@bm25" / "paired.json").read_text())
    assert "weight" not in plain["rerank"]  # at 1 the record (and fingerprint) of before
    assert fused["rerank"]["weight"] == 0.4 and fused["rerank"]["top_k"] == 2
    assert fused["model"]["fingerprint"] != plain["model"]["fingerprint"]
    # FollowIR reranks its candidates whole; fused, BM25 scores them all and is recorded
    followir = json.loads((tmp_path / "out" / "rev_0.4@bm25" / "followir.json").read_text())
    assert followir["rerank"]["first_stage"]["kind"] == "bm25"
    assert followir["rerank"]["top_k"] is None
    alone = json.loads((tmp_path / "out" / "rev@bm25" / "followir.json").read_text())
    assert alone["rerank"]["first_stage"]["kind"] == "candidates"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (RerankSettings([Overlap()], "bm25", weights=[0.0]), r"in \(0, 1\]"),
        (RerankSettings([Overlap()], "bm25", weights=[0.5, 0.5]), "given twice"),
        (RerankSettings([Overlap()], "bm25", weights=[]), "at least one weight"),
        (RerankSettings([], "bm25", weights=[0.5]), "give a --reranker"),
        (RerankSettings([Overlap()], "candidates", weights=[0.5]), "'candidates' first stage"),
    ],
)
def test_bad_weights_fail_before_any_work(
    tmp_path: Path, settings: RerankSettings, message: str
) -> None:
    with pytest.raises(DualviewError, match=message):
        evaluate([], [f"beir={FIX / 'beir'}"], tmp_path / "o", rerank=settings)
    assert not (tmp_path / "o").exists()


def test_a_context_that_cannot_interpolate_is_refused() -> None:
    with pytest.raises(DualviewError, match="needs a reranker"):
        EvalContext(first_stage="bm25", weight=0.5)
    rr = CachedReranker(Overlap(), cache=False)
    with pytest.raises(DualviewError, match="not 'candidates'"):
        EvalContext(first_stage="candidates", reranker=rr, weight=0.5)


def test_reranked_names() -> None:
    assert reranked_name("ce", "embedded:minilm") == "ce@embedded:minilm"
    assert reranked_name("ce", "embedded:minilm", 0.25) == "ce~0.25@embedded:minilm"


def test_cli_interpolate_gives_one_column_per_weight(tmp_path: Path) -> None:
    from dualview.cli import app

    folder = save_overlap(tmp_path / "rr", sign=-1.0)
    out = tmp_path / "out"
    args = ["eval", "-b", f"paired={write_pairs(tmp_path / 'pairs')}", "-o", str(out)]
    args += ["--reranker", str(folder), "--first-stage", "bm25", "--top-k", "2"]
    result = CliRunner().invoke(app, [*args, "--interpolate", "0.4", "--interpolate", "1"])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["models"] == [f"{folder}~0.4@bm25", f"{folder}@bm25"]
    assert summary["values"][f"{folder}~0.4@bm25"]["paired"]["p-MRR"] == pytest.approx(50.0)
    assert summary["values"][f"{folder}@bm25"]["paired"]["p-MRR"] == pytest.approx(-50.0)


def test_the_python_api_takes_one_weight_or_several(tmp_path: Path) -> None:
    import dualview

    folder = save_overlap(tmp_path / "rr", sign=-1.0)
    spec = f"paired={write_pairs(tmp_path / 'pairs')}"
    kwargs = {"rerankers": str(folder), "first_stage": "bm25", "top_k": 2}
    one = dualview.evaluate(None, spec, interpolate=0.4, **kwargs)
    assert one.models == [f"{folder}~0.4@bm25"]
    assert one.metrics[f"{folder}~0.4@bm25"]["paired"]["p-MRR"] == pytest.approx(50.0)
    both = dualview.evaluate(None, spec, interpolate=[1.0, 0.6], **kwargs)
    assert both.models == [f"{folder}@bm25", f"{folder}~0.6@bm25"]
    assert both.metrics[f"{folder}~0.6@bm25"]["paired"]["p-MRR"] == pytest.approx(-50.0)


# --- choosing the weight on a validation set ---------------------------------------------

GOLD_TEST = "paired=src/dualview/demo/data/eval/paired"


def _values(table: dict[str, dict[float, float]]) -> dict:
    """``{reranker: {weight: gold-val p-MRR}}`` as a summary's values over embedded:minilm."""
    return {
        reranked_name(r, "embedded:minilm", w): {"gold-val": {"p-MRR": v, "nDCG@10": 0.0}}
        for r, by_weight in table.items()
        for w, v in by_weight.items()
    }


def test_the_weight_with_the_best_mean_over_the_rerankers_is_chosen() -> None:
    values = _values(
        {"s1": {0.3: 10.0, 0.6: 14.0, 1.0: 2.0}, "s2": {0.3: 16.0, 0.6: 13.0, 1.0: 5.0}}
    )
    choice = choose_weight(
        values, ["s1", "s2"], "embedded:minilm", [1.0, 0.3, 0.6], "gold-val p-MRR", ["gold-val"]
    )
    assert choice.means == {0.3: 13.0, 0.6: 13.5, 1.0: 3.5}
    assert choice.weight == 0.6 and choice.metric == "gold-val p-MRR"
    one = choose_weight(
        values, ["s2"], "embedded:minilm", [0.3, 0.6], "gold-val p-MRR", ["gold-val"]
    )
    assert one.weight == 0.3
    # the same arm in one folder per seed: the same means as both in one folder
    per_seed = [_values({"rr": {0.3: 10.0, 0.6: 14.0}}), _values({"rr": {0.3: 16.0, 0.6: 13.0}})]
    pooled = choose_weight(
        per_seed, ["rr"], "embedded:minilm", [0.3, 0.6], "gold-val p-MRR", ["gold-val"]
    )
    assert pooled.weight == 0.6 and pooled.means == {0.3: 13.0, 0.6: 13.5}
    tied = _values({"s1": {0.2: 7.0, 0.8: 7.0}})
    pick = choose_weight(
        tied, ["s1"], "embedded:minilm", [0.8, 0.2], "gold-val p-MRR", ["gold-val"]
    )
    assert pick.weight == 0.2  # a tie goes to the weight nearer the first stage


def test_a_weight_is_never_chosen_on_a_test_or_held_out_set(tmp_path: Path) -> None:
    values = _values({"s1": {0.5: 1.0}})
    for metric, specs, message in (
        ("phenomena p-MRR", ["phenomena"], "held out"),
        ("paired p-MRR", [GOLD_TEST], "gold test split instances"),
        ("beir p-MRR", ["gold-val"], "no column"),
    ):
        with pytest.raises(DualviewError, match=message):
            choose_weight(values, ["s1"], "embedded:minilm", [0.5], metric, specs)
    with pytest.raises(DualviewError, match=r"s1~0.7@embedded:minilm: no 'gold-val' 'p-MRR'"):
        choose_weight(values, ["s1"], "embedded:minilm", [0.7], "gold-val p-MRR", ["gold-val"])
    with pytest.raises(DualviewError, match=r"no summary\.json"):
        read_values(tmp_path)
    (tmp_path / "summary.json").write_text('{"models": []}')
    with pytest.raises(DualviewError, match=r"summary\.json.*values"):
        read_values(tmp_path)


def test_choose_weight_reads_an_eval_folder(tmp_path: Path) -> None:
    """End to end on a small paired set labelled as a validation set would be: the reversing
    reranker loses p-MRR as its weight grows, so the smallest weight is chosen."""
    folder = save_overlap(tmp_path / "rr", sign=-1.0)
    spec = f"paired={write_pairs(tmp_path / 'pairs')}"
    settings = RerankSettings([str(folder)], "bm25", top_k=2, weights=[0.4, 0.6, 1.0])
    evaluate([], [spec], tmp_path / "out", rerank=settings)
    values = read_values(tmp_path / "out")
    choice = choose_weight(values, [str(folder)], "bm25", [0.4, 0.6, 1.0], "paired p-MRR", [spec])
    assert choice.weight == 0.4 and choice.means == {0.4: 50.0, 0.6: -50.0, 1.0: -50.0}


def test_read_values_keeps_the_columns_of_earlier_calls_into_one_folder(tmp_path: Path) -> None:
    """Weights evaluated over two calls into one folder are read whole, though the second
    call's summary.json lists only its own columns."""
    folder = save_overlap(tmp_path / "rr", sign=-1.0)
    spec = f"paired={write_pairs(tmp_path / 'pairs')}"
    for weights in ([0.4], [0.6, 1.0]):
        settings = RerankSettings([str(folder)], "bm25", top_k=2, weights=weights)
        evaluate([], [spec], tmp_path / "out", rerank=settings)
    listed = json.loads((tmp_path / "out" / "summary.json").read_text())["models"]
    assert not any("~0.4@" in m for m in listed)
    values = read_values(tmp_path / "out")
    choice = choose_weight(values, [str(folder)], "bm25", [0.4, 0.6, 1.0], "paired p-MRR", [spec])
    assert choice.weight == 0.4 and choice.means == {0.4: 50.0, 0.6: -50.0, 1.0: -50.0}
