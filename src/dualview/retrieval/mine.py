"""Hard-negative mining with false-negative protection.

For every record, the query (joined with its instruction, `query_text`) is encoded and
searched against a corpus with any sentence-transformers model; the corpus embeddings are
cached on disk by `dualview.retrieval.encode.Encoder` (model fingerprint, prompt, text
hash), so a second run or a resumed run does not encode again. Search is
`dualview.retrieval.search.topk` (exact in torch; FAISS when installed and the corpus large).

A candidate at 1-based rank ``r`` with score ``s`` becomes a hard negative only if:

- ``rank_start <= r <= rank_end`` (the rank window, e.g. 10-100; default 1-100);
- it is no known positive of the record's family (`KnownPositives`): its own positives,
  for ``orig``/``dv`` pairs the other view's positive, the non-instruct counterpart's
  positives, positives of records with the same query text;
- it is not already a document of the record (positives, instruction negatives; in ``append``
  mode also the existing hard negatives);
- its text is not identical to a positive's text (``skip_positive_duplicates``; catches
  the same passage under another id);
- ``s <= margin_threshold(p)`` with ``p`` the record's lowest positive score: ``margin * p``
  for ``p >= 0`` (default margin 0.95), ``p - (1 - margin) * |p|`` otherwise;
- ``s <= max_score`` when an absolute threshold is set.

The first ``num_negatives`` survivors (best first) are written as ``hard_negatives``
(``replace``) or after the existing ones (``append``); their scores go to
``meta.mined_scores`` and the positive score to ``meta.mined_positive_score``. With
``select`` set, negative selection (`dualview.data.negatives`) runs on the result, so
the output is directly a training file. Records stream in chunks of ``records_per_chunk``;
progress (`dualview.progress`) follows the records, and within a chunk the encoding and
the search.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from dualview import __version__
from dualview.config import StrictModel
from dualview.data.formats.beir import load_corpus
from dualview.data.formats.common import query_text
from dualview.data.jsonl import iter_records
from dualview.data.manifest import file_sha256, read_manifest, source_entry, write_manifest
from dualview.data.negatives import KnownPositives, NegativeConfig, SelectionStats, select_negatives
from dualview.data.schema import Document, Record, content_id
from dualview.errors import DataError
from dualview.io.atomic import AtomicJsonlWriter
from dualview.models.config import QueryTemplate
from dualview.progress import track
from dualview.retrieval.text import doc_text


class MineConfig(StrictModel):
    """Mining options (YAML or ``--set``); see module docstring."""

    model: str = "embedded:minilm"
    num_negatives: int = Field(30, ge=1, description="hard negatives kept per record")
    rank_start: int = Field(1, ge=1, description="first 1-based rank considered")
    rank_end: int = Field(100, ge=1, description="last 1-based rank considered")
    margin: float | None = Field(0.95, gt=0, description="drop scores above margin x positive")
    max_score: float | None = Field(None, description="absolute score threshold")
    skip_positive_duplicates: bool = True
    mode: Literal["replace", "append"] = "replace"
    query_template: QueryTemplate = "{query} {instruction}"
    query_prompt: str | None = None
    document_prompt: str | None = None
    batch_size: int = Field(64, ge=1)
    device: str | None = None
    devices: list[str] | None = Field(
        None, description="several devices at once, one process each (replaces device)"
    )
    precision: Literal["auto", "fp32", "fp16", "bf16"] = Field(
        "auto", description="encoding precision: auto = bf16 on CUDA, fp32 on CPU"
    )
    num_workers: int | None = Field(
        None, ge=0, description="tokenizer processes per device (default: 0 on CPU, a few on CUDA)"
    )
    backend: Literal["auto", "torch", "faiss"] = "auto"
    records_per_chunk: int = Field(2048, ge=1)
    select: NegativeConfig | None = None
    seed: int = 0

    @model_validator(mode="after")
    def _window(self) -> MineConfig:
        if self.rank_end < self.rank_start:
            raise ValueError("rank_end is smaller than rank_start")
        return self


def margin_threshold(positive_score: float, margin: float) -> float:
    """Highest allowed negative score for a positive score (see module docstring)."""
    if positive_score >= 0:
        return margin * positive_score
    return positive_score - (1 - margin) * abs(positive_score)


@dataclass
class Corpus:
    """Documents to mine from, with their embeddings (rows aligned with ``docs``)."""

    docs: list[Document]
    embeddings: np.ndarray
    hashes: list[str]
    source: dict[str, Any]


def load_corpus_documents(path: str | Path) -> list[Document]:
    """A BEIR folder (its ``corpus.jsonl``) or a ``corpus.jsonl``-style file (``_id``, text)."""
    path = Path(path)
    file = path / "corpus.jsonl" if path.is_dir() else path
    return list(load_corpus(file).values())


def documents_of(records_path: str | Path) -> list[Document]:
    """Every distinct document of a record file (the corpus when none is given)."""
    seen: dict[str, Document] = {}
    for record in iter_records(records_path):
        for doc in record.documents():
            seen.setdefault(doc.id, doc)
    return list(seen.values())


def _content_hash(doc: Document) -> str:
    return content_id(doc.text, doc.title)


def encode_corpus(encoder: Any, docs: list[Document], config: MineConfig, source: dict) -> Corpus:
    """Encode (or read from the cache) every corpus document."""
    texts = [doc_text(d) for d in docs]
    emb = encoder.encode(texts, prompt=config.document_prompt, description="encoding corpus")
    return Corpus(docs, emb, [_content_hash(d) for d in docs], source)


@dataclass
class MiningStats:
    """What mining did; goes into the manifest."""

    records: int = 0
    mined: int = 0
    short: int = 0
    rejected: Counter = field(default_factory=Counter)

    def to_dict(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "mined_negatives": self.mined,
            "records_with_fewer_than_num_negatives": self.short,
            "rejected": dict(sorted(self.rejected.items())),
        }


def _filter_candidates(
    record: Record,
    scores: np.ndarray,
    indices: np.ndarray,
    positive_score: float,
    known: frozenset[str],
    corpus: Corpus,
    config: MineConfig,
    stats: MiningStats,
) -> list[tuple[Document, float]]:
    """Apply the protections of the module docstring to one record's ranked candidates."""
    keep_out = {d.id for d in [*record.positives, *record.instruction_negatives]}
    if config.mode == "append":
        keep_out |= {d.id for d in record.hard_negatives}
    positive_hashes = {_content_hash(d) for d in record.positives}
    limit = margin_threshold(positive_score, config.margin) if config.margin else None
    out: list[tuple[Document, float]] = []
    for rank, (score, row) in enumerate(zip(scores, indices, strict=True), start=1):
        doc, reason = corpus.docs[row], None
        if rank < config.rank_start:
            reason = "rank_window"
        elif doc.id in known:
            reason = "known_positive"
        elif doc.id in keep_out:
            reason = "in_record"
        elif config.skip_positive_duplicates and corpus.hashes[row] in positive_hashes:
            reason = "positive_duplicate"
        elif limit is not None and score > limit:
            reason = "margin"
        elif config.max_score is not None and score > config.max_score:
            reason = "max_score"
        if reason:
            stats.rejected[reason] += 1
            continue
        out.append((doc, float(score)))
        if len(out) == config.num_negatives:
            break
    return out


def _mined_record(record: Record, mined: list[tuple[Document, float]], pos: float) -> Record:
    hard = [*record.hard_negatives, *(d for d, _ in mined)]
    meta = {
        **record.meta,
        "mined_positive_score": round(pos, 6),
        "mined_scores": {d.id: round(s, 6) for d, s in mined},
    }
    return record.model_copy(update={"hard_negatives": hard, "meta": meta})


def _chunks(path: str | Path, size: int, limit: int | None = None) -> Iterator[list[Record]]:
    chunk: list[Record] = []
    for record in islice(iter_records(path), limit):
        chunk.append(record)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class Miner:
    """Mines hard negatives for records against one encoded corpus (see module docstring)."""

    def __init__(self, encoder: Any, corpus: Corpus, config: MineConfig) -> None:
        self.encoder = encoder
        self.corpus = corpus
        self.config = config
        self.stats = MiningStats()

    def _positive_scores(self, records: Sequence[Record], queries: np.ndarray) -> np.ndarray:
        """Each record's lowest positive score (the conservative end of the margin)."""
        texts = [doc_text(d) for r in records for d in r.positives]
        emb = self.encoder.encode(
            texts, prompt=self.config.document_prompt, description="positives"
        )
        out, row = np.zeros(len(records), dtype=np.float32), 0
        for i, record in enumerate(records):
            block = emb[row : row + len(record.positives)]
            out[i] = float((block @ queries[i]).min())
            row += len(record.positives)
        return out

    def mine(self, records: Sequence[Record], known: KnownPositives) -> list[Record]:
        """The records with mined hard negatives (``replace`` or ``append``)."""
        from dualview.retrieval.search import topk

        cfg = self.config
        texts = [query_text(r, cfg.query_template) for r in records]
        queries = self.encoder.encode(texts, prompt=cfg.query_prompt, description="queries")
        positive = self._positive_scores(records, queries)
        scores, indices = topk(queries, self.corpus.embeddings, cfg.rank_end, backend=cfg.backend)
        out = []
        for i, record in enumerate(records):
            family = known.for_record(record.id)
            mined = _filter_candidates(
                record, scores[i], indices[i], positive[i], family, self.corpus, cfg, self.stats
            )
            self.stats.records += 1
            self.stats.mined += len(mined)
            self.stats.short += len(mined) < cfg.num_negatives
            if cfg.mode == "replace":
                record = record.model_copy(update={"hard_negatives": []})
            out.append(_mined_record(record, mined, float(positive[i])))
        return out


def known_positives_of(path: str | Path) -> KnownPositives:
    """Family positives of every record in ``path`` (one streaming pass, ids only)."""
    return _known_and_count(path)[0]


def _known_and_count(path: str | Path) -> tuple[KnownPositives, int]:
    """`known_positives_of` and the number of records (the progress's total), in one pass."""
    known, count = KnownPositives(), 0
    for record in iter_records(path):
        known.add_record(record)
        count += 1
    return known, count


@dataclass
class MineResult:
    path: Path
    records: int
    stats: dict[str, Any]
    manifest: dict[str, Any]


def make_encoder(config: MineConfig) -> Any:
    from dualview.retrieval.encode import Encoder

    return Encoder(
        config.model,
        batch_size=config.batch_size,
        device=config.device,
        precision=config.precision,
        num_workers=config.num_workers,
        devices=config.devices,
    )


def mine_file(
    records_path: str | Path,
    out: str | Path,
    config: MineConfig,
    corpus: str | Path | None = None,
    encoder: Any = None,
    limit: int | None = None,
) -> MineResult:
    """Mine negatives for every record of ``records_path`` (the first ``limit`` if given;
    the corpus and the known positives still come from all of them); write ``out`` and its
    manifest."""
    records_path, out = Path(records_path), Path(out)
    if corpus is not None and not Path(corpus).exists():
        raise DataError(corpus, None, "corpus", "does not exist")
    encoder = encoder or make_encoder(config)
    docs = load_corpus_documents(corpus) if corpus else documents_of(records_path)
    source = _corpus_source(corpus, records_path)
    miner = Miner(encoder, encode_corpus(encoder, docs, config, source), config)
    known, count = _known_and_count(records_path)
    total = count if limit is None else min(count, limit)
    chunks = track(_chunks(records_path, config.records_per_chunk, limit), "mining", total, len)
    selection = SelectionStats()
    written: Counter = Counter()
    with AtomicJsonlWriter(out) as writer:
        for chunk in chunks:
            for record in miner.mine(chunk, known):
                final = _select(record, config, known, selection)
                if final is not None:
                    writer.write(final)
                    written[final.view] += 1
    stats = miner.stats.to_dict()
    if config.select is not None:
        stats["selection"] = selection.to_dict()
    manifest = _manifest(records_path, out, config, source, encoder, stats, written)
    if limit is not None:
        manifest["limit"] = limit  # only the first ``limit`` input records were mined
    write_manifest(out, manifest)
    return MineResult(out, sum(written.values()), stats, manifest)


def _select(
    record: Record, config: MineConfig, known: KnownPositives, stats: SelectionStats
) -> Record | None:
    if config.select is None:
        return record
    family = known.for_record(record.id)
    return select_negatives(record, config.select, config.seed, family, (), stats)


def _corpus_source(corpus: str | Path | None, records_path: Path) -> dict[str, Any]:
    if corpus is None:
        return {"documents_of": str(records_path)}
    path = Path(corpus)
    return source_entry(path / "corpus.jsonl" if path.is_dir() else path)


def _manifest(
    records_path: Path,
    out: Path,
    config: MineConfig,
    corpus: dict[str, Any],
    encoder: Any,
    stats: dict[str, Any],
    written: Counter,
) -> dict[str, Any]:
    return {
        "kind": "dualview.mine",
        "dualview_version": __version__,
        "config": config.model_dump(mode="json"),
        "model_fingerprint": getattr(encoder, "fingerprint", None),
        "counts": dict(sorted(written.items())),
        "records": sum(written.values()),
        "sources": [source_entry(records_path)],
        "corpus": corpus,
        "input_manifest": read_manifest(records_path),
        "stats": stats,
        "output": {"file": out.name, "sha256": file_sha256(out)},
    }
