"""Exact top-k (torch chunked and FAISS) and reranking of candidate lists."""

from __future__ import annotations

import numpy as np
import pytest

from dualview.errors import DualviewError
from dualview.retrieval import search
from dualview.retrieval.search import rerank, rerank_run, topk, topk_run


def _data(nq: int = 7, nd: int = 53, dim: int = 8, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((nq, dim)).astype(np.float32), rng.standard_normal((nd, dim)).astype(
        np.float32
    )


def _brute(q, d, k):
    scores = q @ d.T
    idx = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(scores, idx, axis=1), idx


@pytest.mark.parametrize(("query_chunk", "doc_chunk"), [(1024, 65536), (3, 5), (1, 1)])
def test_torch_topk_is_exact_across_chunks(query_chunk: int, doc_chunk: int) -> None:
    q, d = _data()
    scores, idx = topk(q, d, 10, backend="torch", query_chunk=query_chunk, doc_chunk=doc_chunk)
    ref_s, ref_i = _brute(q, d, 10)
    np.testing.assert_array_equal(idx, ref_i)
    np.testing.assert_allclose(scores, ref_s, rtol=1e-5, atol=1e-5)
    assert idx.dtype == np.int64 and scores.dtype == np.float32


def test_faiss_matches_torch() -> None:
    pytest.importorskip("faiss")
    q, d = _data(nq=20, nd=300)
    s1, i1 = topk(q, d, 25, backend="torch")
    s2, i2 = topk(q, d, 25, backend="faiss")
    np.testing.assert_array_equal(i1, i2)
    np.testing.assert_allclose(s1, s2, rtol=1e-4, atol=1e-4)


def test_auto_switches_to_faiss_on_large_corpora(monkeypatch) -> None:
    pytest.importorskip("faiss")
    used: list[str] = []
    monkeypatch.setattr(search, "FAISS_MIN_DOCS", 50)
    monkeypatch.setattr(
        search, "_topk_faiss", lambda q, d, k: used.append("faiss") or _brute(q, d, k)
    )
    monkeypatch.setattr(
        search, "_topk_torch", lambda q, d, k, *a: used.append("torch") or _brute(q, d, k)
    )
    topk(*_data(nd=49), 3)
    topk(*_data(nd=50), 3)
    assert used == ["torch", "faiss"]


def test_k_larger_than_corpus_and_bad_input() -> None:
    q, d = _data(nd=4)
    scores, idx = topk(q, d, 10, backend="torch")
    assert idx.shape == scores.shape == (7, 4)
    with pytest.raises(DualviewError, match="dim"):
        topk(q, d[:, :3], 2)
    with pytest.raises(DualviewError, match="unknown backend"):
        topk(q, d, 2, backend="annoy")  # type: ignore[arg-type]


def test_rerank_scores_candidates_in_order() -> None:
    q, d = _data()
    cands = [[5, 1, 9], [], [0]] + [[2]] * 4
    out = rerank(q, d, cands)
    np.testing.assert_allclose(out[0], [q[0] @ d[5], q[0] @ d[1], q[0] @ d[9]], rtol=1e-5)
    assert out[1].shape == (0,)
    with pytest.raises(DualviewError, match="candidate lists"):
        rerank(q, d, cands[:2])


def test_runs_with_ids() -> None:
    q, d = _data(nq=2, nd=5)
    qids, dids = ["qa", "qb"], [f"d{i}" for i in range(5)]
    run = topk_run(qids, q, dids, d, 2, backend="torch")
    ref_s, ref_i = _brute(q, d, 2)
    assert list(run["qa"]) == [dids[j] for j in ref_i[0]]
    assert run["qb"][dids[ref_i[1][0]]] == pytest.approx(float(ref_s[1][0]), rel=1e-5)
    index = {x: i for i, x in enumerate(dids)}
    rr = rerank_run(qids, q, index, d, {"qa": ["d3", "d0"]})
    assert rr["qa"]["d3"] == pytest.approx(float(q[0] @ d[3]), rel=1e-5)
    assert rr["qb"] == {}
    with pytest.raises(DualviewError, match="unknown candidate"):
        rerank_run(qids, q, index, d, {"qa": ["zz"]})
