"""What every benchmark shares: metadata, the evaluation context, results, and run helpers.

A benchmark is a class with a `BenchmarkMeta` (mteb style: name, reference, Hub
dataset, main score, report columns, pairing, mteb tasks; `dualview.eval.benchmarks.meta`)
built from a local folder in the upstream layout, or from the Hugging
Face Hub by name (`hub_snapshot`, online only). `Benchmark.evaluate` ranks through the
helpers here (`encode_corpus`, `retrieve`, `rerank`) and returns a `BenchmarkResult`:
flat metric means plus per-query values, so every number can be traced to its queries.

The helpers run the context's first stage (``model``: its
`dualview.retrieval.encode.Encoder`; ``bm25``: `dualview.data.bm25.BM25` over the same
documents; ``candidates``: none, the benchmark's own candidate lists) and, when the context
has a reranker, the second stage on the first stage's top ``k``
(`dualview.retrieval.rerank.rerank_top_k`). So a benchmark written for a bi-encoder is
evaluated two-stage without knowing it.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from dualview.data.bm25 import BM25_KINDS, RankedIndex, bm25_index
from dualview.data.formats.common import join_query_instruction
from dualview.data.schema import Document
from dualview.errors import DataError, DualviewError
from dualview.eval.benchmarks.meta import BenchmarkMeta
from dualview.eval.metrics import MetricResult
from dualview.progress import track
from dualview.retrieval.encode import Encoder
from dualview.retrieval.fusion import check_weight
from dualview.retrieval.rerank import CachedReranker, rerank_top_k
from dualview.retrieval.search import Run, rerank_run, topk_run
from dualview.retrieval.text import InstructedQuery, doc_text

#: First stages of two-stage evaluation: a bi-encoder, BM25 (``bm25``: the `bm25s` library,
#: stemmed; ``bm25-builtin``: the hand-written one, `dualview.data.bm25`), the benchmark's
#: candidates.
FIRST_STAGES = ("model", *BM25_KINDS, "candidates")


T = TypeVar("T")


@dataclass
class EvalContext:
    """How to run a model on a benchmark.

    Args:
        encoder: the model to evaluate (the first stage ``model``; None for the others).
        query_template: how a query and its instruction become one text; mteb and
            Promptriever use ``"{query} {instruction}"``. A benchmark whose upstream code puts
            the instruction first (MAIR) uses its own order unless ``force_template`` is set.
        query_prompt: literal prompt the model reads before every query (e.g. ``"query: "``).
        doc_prompt: literal prompt before every document.
        backend: search backend for full-corpus retrieval (``auto``, ``torch``, ``faiss``).
        first_stage: ``model`` (the encoder), ``bm25``, ``bm25-builtin`` or ``candidates``
            (`FIRST_STAGES`).
        reranker: the second stage, which rescores the first stage's ``top_k``; None: the
            first stage's run is the result.
        top_k: documents per query the reranker rescores.
        weight: the reranker's share when its scores are interpolated with the first
            stage's (`dualview.retrieval.fusion`); 1: the reranker's order alone.
        limit: evaluate only the first ``limit`` queries (pairs) of each set (`first`).
        skip: leave out the first ``skip`` queries (pairs) of each set, before ``limit``
            (a validation slice disjoint from a reported ``limit`` run).
    """

    encoder: Encoder | None = None
    query_template: str = "{query} {instruction}"
    force_template: bool = False
    query_prompt: str | None = None
    doc_prompt: str | None = None
    backend: str = "auto"
    first_stage: str = "model"
    reranker: CachedReranker | None = None
    top_k: int = 20
    weight: float = 1.0
    limit: int | None = None
    skip: int = 0

    def __post_init__(self) -> None:
        check_weight(self.weight)
        if self.weight < 1.0 and (self.reranker is None or self.first_stage == "candidates"):
            raise DualviewError(
                "an interpolation weight below 1 blends a reranker's scores with a first "
                "stage's: it needs a reranker and a first stage that scores (not 'candidates')"
            )
        if self.limit is not None and self.limit < 1:
            raise DualviewError(f"limit must be at least 1, not {self.limit}")
        if self.skip < 0:
            raise DualviewError(f"skip must be at least 0, not {self.skip}")
        if self.first_stage not in FIRST_STAGES:
            raise DualviewError(
                f"first stage {self.first_stage!r}: use one of {', '.join(FIRST_STAGES)}"
            )
        if self.first_stage == "model" and self.encoder is None:
            raise DualviewError("first stage 'model' needs an encoder")
        if self.first_stage == "candidates" and self.reranker is None:
            raise DualviewError("first stage 'candidates' needs a reranker (it scores nothing)")
        if self.top_k < 1:
            raise DualviewError(f"top_k must be at least 1, not {self.top_k}")

    def first(self, items: list[T]) -> list[T]:
        """A set's queries (or pairs) in its order, the first ``skip`` left out, then the first
        ``limit`` of the rest (all without one)."""
        rest = items[self.skip :]
        return rest[: self.limit] if self.limit is not None else rest

    def query_text(self, query: str, instruction: str, upstream_template: str | None = None) -> str:
        template = self.query_template
        if upstream_template is not None and not self.force_template:
            template = upstream_template
        joined = join_query_instruction(query, instruction, template)
        return InstructedQuery(joined, query, instruction)


@dataclass
class BenchmarkResult:
    """Metric means (``{"Robust04/p-MRR": 3.1, ...}``) and per-query values per metric."""

    metrics: dict[str, float] = field(default_factory=dict)
    per_query: dict[str, dict[str, float]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, result: MetricResult) -> None:
        self.metrics[name] = result.mean
        self.per_query[name] = result.per_query

    def add_mean(self, name: str, parts: Sequence[str]) -> None:
        """``name`` = unweighted mean of the metrics ``parts`` (e.g. over FollowIR sets)."""
        values = [self.metrics[p] for p in parts if p in self.metrics]
        if values:
            self.metrics[name] = sum(values) / len(values)


class Benchmark(ABC):
    """A loaded benchmark; subclasses set ``meta`` and implement `evaluate`."""

    meta: BenchmarkMeta
    #: a reranker scores every candidate of the benchmark's own lists, whatever the first
    #: stage (FollowIR, as mteb reranks ``top_ranked``)
    reranks_own_candidates: bool = False
    #: files whose bytes define the data (for the data fingerprint)
    files: list[Path]
    #: the folder read when the spec names no path, for data shipped with dualview
    bundled_path: Path | None = None

    @abstractmethod
    def evaluate(self, ctx: EvalContext) -> BenchmarkResult:
        """Run the model of ``ctx`` on this benchmark."""

    def fingerprint(self) -> str:
        """sha256 over the data files' names and bytes (order-independent of discovery)."""
        return files_fingerprint(self.files)


def files_fingerprint(files: Iterable[Path]) -> str:
    digest = hashlib.sha256()
    for path in sorted(set(files)):
        digest.update(path.name.encode())
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:24]


def require_file(path: Path) -> Path:
    if not path.is_file():
        raise DataError(path, None, "file", "does not exist (see docs/architecture/eval.md)")
    return path


def hub_snapshot(repo_id: str, allow_patterns: list[str] | None = None) -> Path:
    """Download a Hub dataset repository (or find it in the HF cache) and return its folder;
    ``allow_patterns`` limits the download to matching files (e.g. one MAIR task)."""
    try:
        from huggingface_hub import snapshot_download

        return Path(
            snapshot_download(repo_id=repo_id, repo_type="dataset", allow_patterns=allow_patterns)
        )
    except Exception as exc:  # offline, unknown repo, auth: one clear line
        raise DualviewError(
            f"cannot fetch Hub dataset {repo_id!r} ({type(exc).__name__}); "
            "give a local folder instead: NAME=PATH"
        ) from None


#: What `encode_corpus` returns: document ids, id -> row, and the first stage's index of
#: the documents (an embedding matrix, a BM25 `RankedIndex`, or None for ``candidates``).
CorpusIndex = tuple[list[str], dict[str, int], object]


def encode_corpus(
    ctx: EvalContext, corpus: Mapping[str, Document], ids: Sequence[str] | None = None
) -> CorpusIndex:
    """The first stage's index of ``ids`` (default: the whole corpus) -> (ids, id -> row,
    embeddings | BM25 | None)."""
    ids = list(corpus) if ids is None else list(dict.fromkeys(ids))
    rows = {d: i for i, d in enumerate(ids)}
    if ctx.first_stage in BM25_KINDS:
        return ids, rows, bm25_index(ctx.first_stage, [corpus[d] for d in ids])
    if ctx.first_stage == "candidates":
        return ids, rows, None
    texts = [doc_text(corpus[d]) for d in ids]
    emb = ctx.encoder.encode(texts, prompt=ctx.doc_prompt, description="documents")  # type: ignore[union-attr]
    return ids, rows, emb


def _encode_queries(ctx: EvalContext, queries: Mapping[str, str]) -> object:
    return ctx.encoder.encode(  # type: ignore[union-attr]
        list(queries.values()), prompt=ctx.query_prompt, description="queries"
    )


def _second_stage(
    ctx: EvalContext,
    queries: Mapping[str, str],
    corpus: Mapping[str, Document],
    run: Run,
    k: int | None,
) -> Run:
    """``run`` itself, or reranked by the context's reranker (its ``k`` best per query)."""
    if ctx.reranker is None:
        return run
    return rerank_top_k(run, queries, lambda d: doc_text(corpus[d]), ctx.reranker, k, ctx.weight)


def retrieve(
    ctx: EvalContext,
    queries: Mapping[str, str],
    corpus: Mapping[str, Document],
    k: int,
    corpus_emb: CorpusIndex | None = None,
) -> Run:
    """Full-corpus top-``k`` run for ``queries`` (query id -> full query text), reranked
    when the context has a reranker."""
    if ctx.first_stage == "candidates":
        raise DualviewError(
            "first stage 'candidates': this benchmark has no candidate lists for some of its "
            "queries; use --first-stage model or bm25"
        )
    doc_ids, _, index = corpus_emb or encode_corpus(ctx, corpus)
    if isinstance(index, RankedIndex):
        run: Run = {}
        for qid, text in track(queries.items(), "bm25 search", len(queries)):
            scores, rows = index.top_k(text, k)
            run[qid] = {doc_ids[r]: float(v) for v, r in zip(scores, rows, strict=True)}
    else:
        q_emb = _encode_queries(ctx, queries)
        run = topk_run(list(queries), q_emb, doc_ids, index, k, backend=ctx.backend)  # type: ignore[arg-type]
    return _second_stage(ctx, queries, corpus, run, ctx.top_k)


def rerank(
    ctx: EvalContext,
    queries: Mapping[str, str],
    corpus: Mapping[str, Document],
    candidates: Mapping[str, Sequence[str]],
    corpus_emb: CorpusIndex | None = None,
    rerank_all: bool = False,
) -> Run:
    """Scores of each query's candidate documents (reranking mode).

    With a reranker in the context: the first stage scores the candidates and the reranker
    rescores its top ``k``; with ``rerank_all`` (or the ``candidates`` first stage) the
    reranker scores every candidate and the first stage is not run, unless the context
    interpolates the two stages' scores (``weight`` below 1), which needs them all.
    """
    alone = rerank_all and ctx.weight == 1.0
    if ctx.reranker is not None and (alone or ctx.first_stage == "candidates"):
        given = {q: {d: 0.0 for d in candidates.get(q, ())} for q in queries}
        return _second_stage(ctx, queries, corpus, given, None)
    if corpus_emb is None:
        needed = [d for q in queries for d in candidates.get(q, ())]
        corpus_emb = encode_corpus(ctx, corpus, needed)
    _, row_of, index = corpus_emb
    if isinstance(index, RankedIndex):
        run: Run = {}
        for qid, text in track(queries.items(), "bm25 scoring", len(queries)):
            scores = index.scores(text)
            run[qid] = {d: float(scores[row_of[d]]) for d in candidates.get(qid, ())}
    else:
        q_emb = _encode_queries(ctx, queries)
        run = rerank_run(list(queries), q_emb, row_of, index, candidates)
    return _second_stage(ctx, queries, corpus, run, None if rerank_all else ctx.top_k)


def check_known_docs(
    path: Path, corpus: Mapping[str, Document], field_name: str, doc_ids: Iterable[str]
) -> None:
    """Raise a located `DataError` for the first id that is not in the corpus."""
    for doc_id in doc_ids:
        if doc_id not in corpus:
            raise DataError(path, None, field_name, f"document {doc_id!r} is not in corpus.jsonl")
