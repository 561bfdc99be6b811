"""p-MRR known values, symmetry and bounds; pytrec_eval measures; pairwise accuracy; mteb parity."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualview.errors import DualviewError
from dualview.eval.metrics import (
    ir_metrics,
    p_mrr,
    pairwise_accuracy,
    parse_metric,
    rank_change_score,
    rank_of,
    ranking,
)


def _run_with_rank(doc: str, rank: int, n: int = 6) -> dict[str, float]:
    """A run of ``n`` documents where ``doc`` sits at ``rank`` (1-based)."""
    others = [f"o{i}" for i in range(n - 1)]
    order = [*others[: rank - 1], doc, *others[rank - 1 :]]
    return {d: float(n - i) for i, d in enumerate(order)}


@pytest.mark.parametrize(
    ("og", "new", "expected"), [(4, 1, -75.0), (1, 4, 75.0), (3, 3, 0.0), (2, 1, -50.0)]
)
def test_p_mrr_known_values(og: int, new: int, expected: float) -> None:
    result = p_mrr({"q": _run_with_rank("x", og)}, {"q": _run_with_rank("x", new)}, {"q": ["x"]})
    assert result.mean == pytest.approx(expected)
    assert result.per_query == {"q": pytest.approx(expected)}


def test_missing_document_ranks_after_the_run() -> None:
    og = {"q": _run_with_rank("x", 1, n=4)}  # rank 1
    new = {"q": {f"o{i}": float(i) for i in range(4)}}  # x absent -> rank 5
    assert rank_of(new["q"], "x") == 5
    assert p_mrr(og, new, {"q": ["x"]}).mean == pytest.approx(100 * (1 - 1 / 5))


def test_ties_are_broken_by_document_id_descending() -> None:
    scores = {"d1": 0.5, "d9": 0.5, "d5": 0.7}
    assert ranking(scores) == ["d5", "d9", "d1"]
    assert rank_of(scores, "d1") == 3
    # x ties with everything: under trec/mteb rules the higher id ranks first.
    og = {"q": {"a": 1.0, "x": 1.0}}  # x (> "a") ranks 1
    new = {"q": {"z": 1.0, "x": 1.0}}  # "z" > "x": x ranks 2
    assert p_mrr(og, new, {"q": ["x"]}).mean == pytest.approx(50.0)


def test_mean_per_query_then_over_queries() -> None:
    og = {"a": _run_with_rank("x", 1) | {"y": 0.0}, "b": _run_with_rank("x", 4)}
    new = {"a": _run_with_rank("x", 4) | {"y": 0.0}, "b": _run_with_rank("x", 1)}
    # query a: x 1->4 (+0.75), y unchanged (0) -> 37.5; query b: -75
    result = p_mrr(og, new, {"a": ["x", "y"], "b": ["x"], "c": ["x"], "d": []})
    assert result.per_query == {"a": pytest.approx(37.5), "b": pytest.approx(-75.0)}
    assert result.mean == pytest.approx((37.5 - 75.0) / 2)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 500), st.integers(1, 500))
def test_rank_change_symmetry_and_bounds(a: int, b: int) -> None:
    forward, backward = rank_change_score(a, b), rank_change_score(b, a)
    assert -1.0 < forward < 1.0 or (a == b and forward == 0.0)
    assert forward == pytest.approx(-backward)
    assert (forward > 0) == (b > a)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-5, 5), min_size=2, max_size=12), st.randoms(use_true_random=False))
def test_p_mrr_swapping_runs_negates(scores: list[float], rnd: random.Random) -> None:
    docs = [f"d{i}" for i in range(len(scores))]
    shuffled = scores[:]
    rnd.shuffle(shuffled)
    og = {"q": dict(zip(docs, scores, strict=True))}
    new = {"q": dict(zip(docs, shuffled, strict=True))}
    changed = {"q": docs[: max(1, len(docs) // 2)]}
    forward, backward = p_mrr(og, new, changed).mean, p_mrr(new, og, changed).mean
    assert forward == pytest.approx(-backward, abs=1e-9)
    assert -100.0 <= forward <= 100.0
    assert p_mrr(og, og, changed).mean == 0.0


def test_ir_metrics_values() -> None:
    qrels = {"q1": {"a": 1, "b": 0}, "q2": {"c": 2}, "q3": {"z": 1}}
    run = {"q1": {"b": 0.9, "a": 0.5, "c": 0.1}, "q2": {"c": 0.3, "a": 0.2}}
    res = ir_metrics(qrels, run, ["nDCG@10", "MRR", "MRR@1", "Recall@1", "MAP@1000", "P@1"])
    assert res["MRR"].per_query == {"q1": 0.5, "q2": 1.0, "q3": 0.0}  # q3 has no run: 0
    assert res["MRR"].mean == pytest.approx(0.5)
    assert res["MRR@1"].per_query["q1"] == 0.0
    assert res["Recall@1"].per_query == {"q1": 0.0, "q2": 1.0, "q3": 0.0}
    assert res["nDCG@10"].per_query["q1"] == pytest.approx(1 / math.log2(3))
    assert res["MAP@1000"].per_query["q1"] == pytest.approx(0.5)
    assert res["P@1"].mean == pytest.approx(1 / 3)


def test_parse_metric() -> None:
    assert parse_metric("nDCG@10") == ("ndcg", 10)
    assert parse_metric("MRR") == ("mrr", None)
    for bad in ("ndcg", "hits@3", "map@x"):
        with pytest.raises(DualviewError, match="unknown metric"):
            parse_metric(bad)


def test_pairwise_accuracy() -> None:
    run = {"q": {"s1": 0.9, "v1": 0.8, "s2": 0.1}, "r": {"s": 0.1, "v": 0.2}}
    res = pairwise_accuracy(run, {"q": ["s1", "s2"], "r": ["s"]}, {"q": ["v1"], "r": ["v"]})
    assert res.per_query == {"q": 50.0, "r": 0.0}
    assert res.mean == 25.0


def test_p_mrr_equals_mteb_on_random_runs() -> None:
    """Same numbers as mteb's own implementation (mteb reports the fraction, we ×100)."""
    retrieval_metrics = pytest.importorskip("mteb._evaluators.retrieval_metrics")
    rnd = random.Random(7)
    for _ in range(20):
        og_run, new_run, changed = {}, {}, {}
        for q in range(rnd.randint(1, 8)):
            docs = list({f"d{rnd.randint(0, 40)}" for _ in range(rnd.randint(3, 15))})
            og_run[f"q{q}"] = {d: float(rnd.randint(0, 5)) for d in docs}  # many ties
            new_run[f"q{q}"] = {d: rnd.random() for d in docs if rnd.random() < 0.9}
            changed[f"q{q}"] = rnd.sample([*sorted(docs), "missing"], k=rnd.randint(1, 2))
        ours = p_mrr(og_run, new_run, changed).mean
        theirs = retrieval_metrics.calculate_pmrr(
            {f"{q}-og": r for q, r in og_run.items()},
            {f"{q}-changed": r for q, r in new_run.items()},
            changed,
        )
        assert ours / 100 == pytest.approx(theirs, abs=1e-9)
