"""The second stage of two-stage retrieval: a reranker rescores a first stage's top k, cached.

- `CachedReranker` wraps any `dualview.models.reranker.Reranker` with an on-disk score
  cache: one SQLite file per reranker fingerprint, ``<cache_dir>/rerank_scores/<hash of
  the fingerprint>.sqlite``, keyed by `pair_key` (a hash of query, instruction and
  passage). It is the embedding cache's store (`dualview.retrieval.encode.EmbeddingCache`)
  holding vectors of size 1. Scores already stored are read back instead of running the
  model; the rest is scored longest first in chunks, each committed as it finishes (an
  interrupted evaluation resumes).
- `rerank_top_k` turns a first-stage run into the reranked run: each query's ``k`` best
  first-stage documents get the reranker's scores and come first; the documents beyond
  ``k`` stay in the run, below them, in their first-stage order (so recall at depths past
  ``k`` and the rank of a document the reranker never saw are the first stage's). With a
  ``weight`` below 1 the top ``k`` are ordered by both stages' interpolated scores instead
  (`dualview.retrieval.fusion`).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from dualview.models.reranker import Reranker
from dualview.progress import track
from dualview.retrieval.encode import EmbeddingCache
from dualview.retrieval.fusion import check_weight, interpolate
from dualview.retrieval.search import Run
from dualview.retrieval.text import InstructedQuery

#: Pairs scored per cache commit.
CHUNK_SIZE = 1024


class ScoreCache(EmbeddingCache):
    """Reranker scores (vectors of size 1) of one reranker fingerprint."""

    FOLDER = "rerank_scores"
    LABEL = "reranker score"


def pair_key(query: str, instruction: str, passage: str) -> str:
    """Cache key of one (query, instruction, passage) triple."""
    payload = f"{query}\x00{instruction}\x00{passage}".encode()
    return hashlib.sha256(payload).hexdigest()[:32]


def cache_file_name(fingerprint: str) -> str:
    """File stem of a fingerprint's cache (the fingerprint may hold any characters)."""
    return hashlib.sha256(fingerprint.encode()).hexdigest()[:24]


def query_parts(text: str) -> tuple[str, str]:
    """``(query, instruction)`` of a query text: the parts of an `InstructedQuery`, else the
    whole text with no instruction."""
    if isinstance(text, InstructedQuery):
        return text.query, text.instruction
    return str(text), ""


@dataclass
class RerankStats:
    """Pairs asked for, read from the cache, scored by the model; model calls; seconds."""

    pairs: int = 0
    cached: int = 0
    scored: int = 0
    calls: int = 0
    seconds: float = 0.0


class CachedReranker:
    """A `Reranker` whose scores are cached on disk (see module docstring).

    Args:
        reranker: the model.
        batch_size: pairs per forward pass (passed to ``reranker.score``).
        cache: read and write the score cache.
        show_progress: progress over the pairs scored (`dualview.progress.track`: a bar on a
            terminal when there is more than one chunk, periodic lines in a log).
    """

    def __init__(
        self,
        reranker: Reranker,
        batch_size: int = 32,
        cache: bool = True,
        show_progress: bool = True,
    ) -> None:
        self.reranker = reranker
        self.batch_size = batch_size
        self.use_cache = cache
        self.show_progress = show_progress
        self.stats = RerankStats()
        self._cache: ScoreCache | None = None

    @property
    def fingerprint(self) -> str:
        return self.reranker.fingerprint

    @property
    def cache(self) -> ScoreCache:
        if self._cache is None:
            self._cache = ScoreCache(cache_file_name(self.fingerprint))
        return self._cache

    def score(
        self, queries: Sequence[str], instructions: Sequence[str], passages: Sequence[str]
    ) -> np.ndarray:
        """Scores of the triples, float32 ``[n]``, in input order; duplicates scored once."""
        triples = list(zip(queries, instructions, passages, strict=True))
        keys = [pair_key(*t) for t in triples]
        self.stats.pairs += len(keys)
        known: dict[str, float] = {}
        if self.use_cache and keys:
            known = {k: float(v[0]) for k, v in self.cache.get_many(keys, 1).items()}
        self.stats.cached += sum(k in known for k in dict.fromkeys(keys))
        todo: dict[str, tuple[str, str, str]] = {}
        for key, triple in zip(keys, triples, strict=True):
            if key not in known:
                todo.setdefault(key, triple)
        known.update(self._score_missing(todo))
        return np.asarray([known[k] for k in keys], dtype=np.float32)

    def _score_missing(self, todo: dict[str, tuple[str, str, str]]) -> dict[str, float]:
        """Score ``key -> triple`` longest first, one chunk at a time, caching each chunk."""
        order = sorted(todo, key=lambda k: sum(len(p) for p in todo[k]), reverse=True)
        starts = range(0, len(order), CHUNK_SIZE)
        steps: Iterable[int] = starts
        if self.show_progress:
            steps = track(
                starts,
                "reranking",
                len(order),
                size=lambda start: min(CHUNK_SIZE, len(order) - start),
                bar_above=CHUNK_SIZE,
            )
        out: dict[str, float] = {}
        for start in steps:
            chunk = order[start : start + CHUNK_SIZE]
            q, i, p = (list(part) for part in zip(*(todo[k] for k in chunk), strict=True))
            began = time.perf_counter()
            scores = np.asarray(
                self.reranker.score(q, i, p, batch_size=self.batch_size), dtype=np.float32
            ).reshape(-1)
            self.stats.seconds += time.perf_counter() - began
            self.stats.calls += 1
            self.stats.scored += len(chunk)
            if scores.shape[0] != len(chunk):
                raise ValueError(
                    f"reranker {type(self.reranker).__name__}: {scores.shape[0]} scores "
                    f"for {len(chunk)} pairs"
                )
            if self.use_cache:
                self.cache.put_many(chunk, scores[:, None])
            out.update(zip(chunk, scores.tolist(), strict=True))
        return out

    def close(self) -> None:
        """Close the cache file (it reopens when needed)."""
        if self._cache is not None:
            self._cache.close()
            self._cache = None


def ranked(scores: Mapping[str, float]) -> list[str]:
    """Document ids best first: by score, then by id, both descending (the metrics' rule)."""
    return sorted(scores, key=lambda d: (scores[d], d), reverse=True)


def rerank_top_k(
    first: Run,
    queries: Mapping[str, str],
    passage_text: Callable[[str], str],
    reranker: CachedReranker,
    k: int | None,
    weight: float = 1.0,
) -> Run:
    """The reranked run of ``first`` (see module docstring); ``k=None`` reranks every
    document of each query.

    Args:
        first: the first-stage run ``{qid: {doc_id: score}}``.
        queries: query id -> query text (an `InstructedQuery` keeps its instruction apart).
        passage_text: doc id -> the text the reranker reads.
        reranker: the second stage.
        k: how many of each query's best first-stage documents are reranked.
        weight: the reranker's share in (0, 1]: below 1 the top ``k`` are ranked by the
            interpolation of both stages' scores (`dualview.retrieval.fusion`), the
            reranker's scores read from its cache as ever.
    """
    check_weight(weight)
    heads = {q: ranked(docs)[:k] if k is not None else list(docs) for q, docs in first.items()}
    triples = [(q, d) for q, docs in heads.items() for d in docs]
    parts = {q: query_parts(queries[q]) for q in heads}
    scores = reranker.score(
        [parts[q][0] for q, _ in triples],
        [parts[q][1] for q, _ in triples],
        [passage_text(d) for _, d in triples],
    )
    new: dict[str, dict[str, float]] = {q: {} for q in first}
    for (q, d), s in zip(triples, scores.tolist(), strict=True):
        new[q][d] = s
    if weight < 1.0:
        new = {q: interpolate(first[q], new[q], weight) for q in new}
    for q, docs in first.items():
        tail = [d for d in ranked(docs) if d not in new[q]]
        floor = min(new[q].values(), default=0.0)
        for j, d in enumerate(tail):
            new[q][d] = floor - 1.0 - j
    return new


__all__ = [
    "CHUNK_SIZE",
    "CachedReranker",
    "RerankStats",
    "ScoreCache",
    "cache_file_name",
    "pair_key",
    "query_parts",
    "ranked",
    "rerank_top_k",
]
