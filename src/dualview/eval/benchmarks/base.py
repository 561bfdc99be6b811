"""What every benchmark shares: metadata, the evaluation context, results, and run helpers.

A benchmark is a class with a `BenchmarkMeta` (mteb style: name, reference, Hub
dataset, main score) built from a local folder in the upstream layout, or from the Hugging
Face Hub by name (`hub_snapshot`, online only). `Benchmark.evaluate` encodes with
the context's `dualview.retrieval.encode.Encoder` and returns a `BenchmarkResult`:
flat metric means plus per-query values, so every number can be traced to its queries.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dualview.data.formats.common import join_query_instruction
from dualview.data.schema import Document
from dualview.errors import DataError, DualviewError
from dualview.eval.metrics import MetricResult
from dualview.retrieval.encode import Encoder
from dualview.retrieval.search import Run, rerank_run, topk_run
from dualview.retrieval.text import InstructedQuery, doc_text


@dataclass(frozen=True)
class BenchmarkMeta:
    """Description of a benchmark (what mteb's ``TaskMetadata`` holds, in small)."""

    name: str
    description: str
    reference: str
    main_score: str
    hub_dataset: str | None = None


@dataclass
class EvalContext:
    """How to run a model on a benchmark.

    Args:
        encoder: the model to evaluate.
        query_template: how a query and its instruction become one text; mteb and
            Promptriever use ``"{query} {instruction}"``. A benchmark whose upstream code puts
            the instruction first (MAIR) uses its own order unless ``force_template`` is set.
        query_prompt: literal prompt the model reads before every query (e.g. ``"query: "``).
        doc_prompt: literal prompt before every document.
        backend: search backend for full-corpus retrieval (``auto``, ``torch``, ``faiss``).
    """

    encoder: Encoder
    query_template: str = "{query} {instruction}"
    force_template: bool = False
    query_prompt: str | None = None
    doc_prompt: str | None = None
    backend: str = "auto"

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


def encode_corpus(
    ctx: EvalContext, corpus: Mapping[str, Document], ids: Sequence[str] | None = None
) -> tuple[list[str], dict[str, int], object]:
    """Embeddings of ``ids`` (default: the whole corpus) -> (ids, id -> row, matrix)."""
    ids = list(corpus) if ids is None else list(dict.fromkeys(ids))
    texts = [doc_text(corpus[d]) for d in ids]
    emb = ctx.encoder.encode(texts, prompt=ctx.doc_prompt, description="documents")
    return ids, {d: i for i, d in enumerate(ids)}, emb


def retrieve(
    ctx: EvalContext,
    queries: Mapping[str, str],
    corpus: Mapping[str, Document],
    k: int,
    corpus_emb: tuple[list[str], dict[str, int], object] | None = None,
) -> Run:
    """Full-corpus top-``k`` run for ``queries`` (query id -> full query text)."""
    doc_ids, _, doc_emb = corpus_emb or encode_corpus(ctx, corpus)
    qids = list(queries)
    q_emb = ctx.encoder.encode(
        [queries[q] for q in qids], prompt=ctx.query_prompt, description="queries"
    )
    return topk_run(qids, q_emb, doc_ids, doc_emb, k, backend=ctx.backend)  # type: ignore[arg-type]


def rerank(
    ctx: EvalContext,
    queries: Mapping[str, str],
    corpus: Mapping[str, Document],
    candidates: Mapping[str, Sequence[str]],
    corpus_emb: tuple[list[str], dict[str, int], object] | None = None,
) -> Run:
    """Scores of each query's candidate documents (reranking mode)."""
    if corpus_emb is None:
        needed = [d for q in queries for d in candidates.get(q, ())]
        corpus_emb = encode_corpus(ctx, corpus, needed)
    _, index, doc_emb = corpus_emb
    qids = list(queries)
    q_emb = ctx.encoder.encode(
        [queries[q] for q in qids], prompt=ctx.query_prompt, description="queries"
    )
    return rerank_run(qids, q_emb, index, doc_emb, candidates)


def check_known_docs(
    path: Path, corpus: Mapping[str, Document], field_name: str, doc_ids: Iterable[str]
) -> None:
    """Raise a located `DataError` for the first id that is not in the corpus."""
    for doc_id in doc_ids:
        if doc_id not in corpus:
            raise DataError(path, None, field_name, f"document {doc_id!r} is not in corpus.jsonl")
