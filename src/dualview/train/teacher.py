"""Teacher scores for distillation (``loss.teacher``), computed once per teacher and data.

A distillation objective (`dualview.train.objectives.distill`) needs the teacher's score of
every pair the reranker trains on: each record's positives and its first
``data.num_negatives`` labelled negatives (`dualview.train.batching.labelled_documents`).
`training_teacher_scores` computes them before the first step and hands the trainer a
``(record id, document id) -> score`` table that `dualview.train.batching.BatchStream`
copies into each batch (`dualview.train.batching.Batch.teacher_scores`).

- **Teacher**: a saved reranker folder (loaded by its kind,
  `dualview.models.kinds.SavedKind.load_reranker`: its score of (query, instruction,
  passage)), or else a bi-encoder (a path, a Hub name,
  ``embedded:minilm``): the cosine of the query text (``model.query_template``, as the
  student reads it) and the document text, as the first stage ranks (`BiEncoderTeacher`).
- **Cache**: one SQLite file per (teacher fingerprint, sha256 of the training file),
  ``<cache_dir>/teacher_scores/<hash>.sqlite`` (`TeacherScoreCache`), each pair keyed by
  `dualview.retrieval.rerank.pair_key` (query, instruction, passage). It is the reranker
  score cache's store and writer (`dualview.retrieval.rerank.CachedReranker`): pairs are
  scored longest first in chunks, each committed when it finishes, so a killed run resumes
  with the pairs still missing, and a second run over the same data makes no teacher call.
  The fingerprint covers the weights (and template, precision), so a retrained teacher
  never reads stale scores.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from dualview.data.formats.common import join_query_instruction
from dualview.data.manifest import file_sha256
from dualview.data.schema import Record
from dualview.models.reranker import Reranker
from dualview.models.saved import saved_kind
from dualview.resources import resolve_model_path
from dualview.retrieval.encode import Encoder
from dualview.retrieval.rerank import CachedReranker, RerankStats, ScoreCache, cache_file_name
from dualview.retrieval.text import InstructedQuery, doc_text
from dualview.train.batching import TeacherScores, labelled_documents
from dualview.train.config import TrainConfig


class TeacherScoreCache(ScoreCache):
    """Teacher scores of one (teacher fingerprint, training file sha256)."""

    FOLDER = "teacher_scores"
    LABEL = "teacher score"


class BiEncoderTeacher:
    """A bi-encoder as a `dualview.models.reranker.Reranker`: the cosine of the query text
    (query and instruction through ``template``) and the passage."""

    def __init__(self, encoder: Encoder, template: str) -> None:
        self.encoder = encoder
        self.template = template

    @cached_property
    def fingerprint(self) -> str:
        return f"bi_encoder_cosine:{self.encoder.fingerprint}:{self.template}"

    def score(
        self,
        queries: Sequence[str],
        instructions: Sequence[str],
        passages: Sequence[str],
        batch_size: int = 32,
    ) -> np.ndarray:
        texts = [
            InstructedQuery(join_query_instruction(q, i, self.template), q, i)
            for q, i in zip(queries, instructions, strict=True)
        ]
        left = self.encoder.encode(texts, description="teacher queries")
        right = self.encoder.encode(list(passages), description="teacher passages")
        return np.sum(left * right, axis=1).astype(np.float32)


def load_teacher(name: str, template: str, device: str | None = None) -> Reranker:
    """The teacher ``name`` names: a model whose kind scores pairs (a reranker folder),
    loaded by its kind (`dualview.models.saved.saved_kind`); else a first stage (a
    bi-encoder folder, a Hub name) scored by cosine."""
    folder = Path(resolve_model_path(name))
    kind = saved_kind(folder)
    if kind.scores_pairs:
        return kind.load_reranker(folder, device)
    encoder = Encoder(name, device=device, normalize=True, show_progress=False)
    return BiEncoderTeacher(encoder, template)


class TeacherScorer(CachedReranker):
    """`CachedReranker` whose cache file is keyed by the teacher and the training data."""

    def __init__(self, teacher: Reranker, data_sha256: str, batch_size: int = 32) -> None:
        super().__init__(teacher, batch_size=batch_size, show_progress=True)
        self.data_sha256 = data_sha256

    @property
    def cache(self) -> ScoreCache:
        if self._cache is None:
            key = f"{self.fingerprint}\x00{self.data_sha256}"
            self._cache = TeacherScoreCache(cache_file_name(key))
        return self._cache


@dataclass
class TeacherRun:
    """The teacher's scores of a training file's pairs, and what computing them took."""

    scores: TeacherScores
    stats: RerankStats


def score_records(
    scorer: CachedReranker, records: Sequence[Record], num_negatives: int
) -> TeacherRun:
    """The teacher score of every (record, labelled document) pair a batch can hold."""
    keys: list[tuple[str, str]] = []
    queries: list[str] = []
    instructions: list[str] = []
    passages: list[str] = []
    for record in records:
        for doc, _ in labelled_documents(record, num_negatives):
            keys.append((record.id, doc.id))
            queries.append(record.query)
            instructions.append(record.instruction)
            passages.append(doc_text(doc))
    values = scorer.score(queries, instructions, passages)
    return TeacherRun(dict(zip(keys, values.tolist(), strict=True)), scorer.stats)


def training_teacher_scores(
    teacher: str,
    records: Sequence[Record],
    train_file: Path,
    num_negatives: int,
    template: str,
    device: str | None = None,
) -> TeacherRun:
    """Scores of ``teacher`` for the pairs of ``records`` (read from ``train_file``),
    from the cache where present (see the module docstring)."""
    scorer = TeacherScorer(load_teacher(teacher, template, device), file_sha256(train_file))
    try:
        return score_records(scorer, records, num_negatives)
    finally:
        scorer.close()


def run_teacher(
    config: TrainConfig, records: Sequence[Record], device: str | None = None
) -> TeacherScores | None:
    """The teacher scores a run's batches carry: None unless ``loss.teacher`` is set."""
    teacher = getattr(config.loss, "teacher", None)  # a distillation objective's setting
    if teacher is None:
        return None
    run = training_teacher_scores(
        teacher,
        records,
        config.data.train_file,
        config.data.num_negatives,
        config.model.query_template,
        device,
    )
    stats = run.stats
    print(
        f"teacher {teacher}: {stats.pairs} pairs, {stats.cached} from the cache, "
        f"{stats.scored} scored",
        file=sys.stderr,
    )
    return run.scores
