"""Nearest documents by dot product: exact top-k (torch, chunked; FAISS for large corpora).

The score is the dot product of the vectors as given; `dualview.retrieval.encode.Encoder`
normalizes them for cosine models, so the dot product is the model's own score.

- `topk`: the ``k`` best documents of every query over the whole corpus. ``backend``
  ``"torch"`` is exact and chunked over queries and documents (memory stays bounded);
  ``"faiss"`` uses an exact inner-product index (``IndexFlatIP``), faster on large corpora;
  ``"auto"`` picks FAISS from `FAISS_MIN_DOCS` documents on when it is installed. The torch
  search reports its progress over the queries (`dualview.progress.track`).
- `rerank`: scores of given candidate lists (reranking benchmarks such as FollowIR).
- `topk_run` / `rerank_run`: the same with ids, returning a *run*
  ``{query_id: {doc_id: score}}`` as pytrec_eval and `dualview.eval.metrics` take it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from dualview.errors import DualviewError
from dualview.progress import track
from dualview.resources import optional_import

if TYPE_CHECKING:  # torch is imported where it is used, so the CLI starts fast
    import torch

Backend = Literal["auto", "torch", "faiss"]
Run = dict[str, dict[str, float]]

#: ``backend="auto"`` switches to FAISS from this many documents on (when installed).
FAISS_MIN_DOCS = 200_000
#: Queries and documents per block of the chunked torch search.
QUERY_CHUNK = 1024
DOC_CHUNK = 65_536


def _as_tensor(x: Any) -> torch.Tensor:
    import torch

    tensor = x if isinstance(x, torch.Tensor) else torch.from_numpy(np.asarray(x))
    return tensor.detach().to(dtype=torch.float32)


def _as_array(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().numpy()
    return np.ascontiguousarray(x, dtype=np.float32)


def faiss_available() -> bool:
    """Whether ``import faiss`` works (the ``faiss`` extra)."""
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


def _check_shapes(queries: Any, docs: Any) -> None:
    if len(queries.shape) != 2 or len(docs.shape) != 2:
        raise DualviewError("topk: queries and docs must be 2-D arrays (n, dim)")
    if queries.shape[1] != docs.shape[1]:
        raise DualviewError(
            f"topk: query dim {queries.shape[1]} differs from document dim {docs.shape[1]}"
        )


def topk(
    queries: Any,
    docs: Any,
    k: int,
    backend: Backend = "auto",
    query_chunk: int = QUERY_CHUNK,
    doc_chunk: int = DOC_CHUNK,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` highest-scoring documents per query, best first.

    Args:
        queries: ``(nq, dim)`` array or tensor.
        docs: ``(nd, dim)`` array or tensor.
        k: how many per query; capped at ``nd``.
        backend: ``"torch"``, ``"faiss"`` or ``"auto"`` (see module docstring).

    Returns:
        ``(scores, indices)``, both ``(nq, min(k, nd))``: float32 scores and int64 row
        indices into ``docs``.
    """
    _check_shapes(queries, docs)
    k = min(k, docs.shape[0])
    if k <= 0 or queries.shape[0] == 0:
        empty = (queries.shape[0], max(k, 0))
        return np.zeros(empty, dtype=np.float32), np.zeros(empty, dtype=np.int64)
    if backend == "auto":
        backend = "faiss" if docs.shape[0] >= FAISS_MIN_DOCS and faiss_available() else "torch"
    if backend == "faiss":
        return _topk_faiss(queries, docs, k)
    if backend == "torch":
        return _topk_torch(queries, docs, k, query_chunk, doc_chunk)
    raise DualviewError(f"topk: unknown backend {backend!r} (auto, torch, faiss)")


def _topk_torch(
    queries: Any, docs: Any, k: int, query_chunk: int, doc_chunk: int
) -> tuple[np.ndarray, np.ndarray]:
    """Exact search in blocks; a running top-k per query block is merged across doc blocks."""
    import torch

    q_all, d_all = _as_tensor(queries), _as_tensor(docs)
    scores_out, index_out = [], []
    n = q_all.shape[0]
    blocks = track(
        range(0, n, query_chunk),
        "searching",
        n,
        size=lambda start: min(query_chunk, n - start),
        bar_above=query_chunk,
    )
    with torch.inference_mode():
        for qs in blocks:
            q = q_all[qs : qs + query_chunk]
            best_s = torch.full((q.shape[0], 0), float("-inf"))
            best_i = torch.zeros((q.shape[0], 0), dtype=torch.long)
            for ds in range(0, d_all.shape[0], doc_chunk):
                block = q @ d_all[ds : ds + doc_chunk].T
                s, i = torch.topk(block, min(k, block.shape[1]), dim=1)
                merged_s = torch.cat([best_s, s], dim=1)
                merged_i = torch.cat([best_i, i + ds], dim=1)
                best_s, pos = torch.topk(merged_s, min(k, merged_s.shape[1]), dim=1)
                best_i = torch.gather(merged_i, 1, pos)
            scores_out.append(best_s)
            index_out.append(best_i)
    return torch.cat(scores_out).numpy(), torch.cat(index_out).numpy().astype(np.int64)


def _topk_faiss(queries: Any, docs: Any, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact inner-product search with ``faiss.IndexFlatIP``."""
    faiss = optional_import("faiss", "backend 'faiss'")
    d = _as_array(docs)
    index = faiss.IndexFlatIP(d.shape[1])
    index.add(d)
    scores, indices = index.search(_as_array(queries), k)
    return scores.astype(np.float32), indices.astype(np.int64)


def rerank(query_emb: Any, doc_emb: Any, candidates: Sequence[Sequence[int]]) -> list[np.ndarray]:
    """Scores of each query's candidate documents, in the candidates' order.

    Args:
        query_emb: ``(nq, dim)``.
        doc_emb: ``(nd, dim)``; candidates index its rows.
        candidates: ``candidates[i]`` are the row indices into ``doc_emb`` to score for query i.

    Returns:
        ``scores[i][j]`` = ``query_emb[i] · doc_emb[candidates[i][j]]`` (float32 arrays).
    """
    if len(candidates) != query_emb.shape[0]:
        raise DualviewError(
            f"rerank: {len(candidates)} candidate lists for {query_emb.shape[0]} queries"
        )
    q, d = _as_array(query_emb), _as_array(doc_emb)
    _check_shapes(q, d)
    out = []
    for row, cand in enumerate(candidates):
        idx = np.asarray(cand, dtype=np.int64)
        out.append(d[idx] @ q[row] if idx.size else np.zeros(0, dtype=np.float32))
    return out


def topk_run(
    query_ids: Sequence[str],
    query_emb: Any,
    doc_ids: Sequence[str],
    doc_emb: Any,
    k: int,
    backend: Backend = "auto",
) -> Run:
    """`topk` as a run ``{query_id: {doc_id: score}}``."""
    scores, indices = topk(query_emb, doc_emb, k, backend=backend)
    return {
        qid: {doc_ids[j]: float(s) for s, j in zip(srow, irow, strict=True)}
        for qid, srow, irow in zip(query_ids, scores, indices, strict=True)
    }


def rerank_run(
    query_ids: Sequence[str],
    query_emb: Any,
    doc_index: Mapping[str, int],
    doc_emb: Any,
    candidates: Mapping[str, Sequence[str]],
) -> Run:
    """`rerank` with ids: ``candidates[qid]`` are doc ids, ``doc_index`` maps id -> row.

    A candidate id missing from ``doc_index`` raises `DualviewError`.
    """
    rows = []
    for qid in query_ids:
        try:
            rows.append([doc_index[d] for d in candidates.get(qid, ())])
        except KeyError as exc:
            raise DualviewError(
                f"rerank: query {qid!r}: unknown candidate document {exc}"
            ) from None
    scores = rerank(query_emb, doc_emb, rows)
    return {
        qid: {d: float(s) for d, s in zip(candidates.get(qid, ()), srow, strict=True)}
        for qid, srow in zip(query_ids, scores, strict=True)
    }
