"""Batch building: dual views co-batched, documents de-duplicated, a relation matrix per batch.

Records are grouped by instance: an ``orig`` record and every ``dv`` record whose
``parent_id`` is its id form one group (a ``plain`` record is a group of one). The view
policy decides what happens to a group:

- ``together``: the whole group lands in one batch (the paper's setup);
- ``separate``: members of a group never share a batch (an ablation);
- ``random``: records are shuffled individually.

Within a batch every document (positives + the first ``num_negatives`` labelled negatives of
each record) is collected once per id, so the shared documents of an ``orig`` and its ``dv``
are encoded once. The relation matrix ``R[q, d]`` is built row by row from each record's own
labels: 1 positive, -1 labelled negative, 0 unlabelled. Because rows are independent, a
document that is the positive of one record and an instruction negative of its dual view is
+1 in one row and -1 in the other, which is exactly what dual-view training needs.

The order is a pure function of ``(seed, epoch)``; a data position is ``(epoch, batch index)``,
so a resumed run replays the same batches.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import torch

from dualview.data.record_index import IndexedRecords, instance_key
from dualview.data.schema import Document, Record
from dualview.errors import ConfigError
from dualview.models.bi_encoder import record_query_text
from dualview.models.tokens import TokenizedTexts
from dualview.retrieval.text import doc_text  # documents read as in evaluation

POSITIVE, NEGATIVE, UNLABELLED = 1, -1, 0

#: Teacher scores of training pairs, ``(record id, document id) -> score``
#: (`dualview.train.teacher`).
TeacherScores = Mapping[tuple[str, str], float]


@dataclass
class Batch:
    """One contrastive batch: queries, de-duplicated documents and their relations."""

    records: list[Record]
    query_texts: list[str]
    doc_ids: list[str]
    doc_texts: list[str]
    relations: torch.Tensor  # int8 [num_queries, num_documents]
    template: str
    # Token ids per text group ("queries", "documents", "cross") when the loader tokenized
    # the batch ahead of the step (dualview.train.loader); empty: the step tokenizes.
    tokens: dict[str, TokenizedTexts] = field(default_factory=dict)
    # float32 [P]: the teacher's score of each pair of `pair_index`, in its order, when the
    # run distils from a teacher (``loss.teacher``); None otherwise.
    teacher_scores: torch.Tensor | None = None

    @property
    def first_positive(self) -> torch.Tensor:
        """Column of each record's first positive (the target of the InF-Embed objectives)."""
        column = {doc_id: j for j, doc_id in enumerate(self.doc_ids)}
        return torch.tensor([column[r.positives[0].id] for r in self.records])

    def pair_index(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(rows, cols)`` of every labelled (query, document) pair, row-major: the pairs a
        reranker scores (each record's positives and its labelled negatives)."""
        rows, cols = torch.nonzero(self.relations != UNLABELLED, as_tuple=True)
        return rows, cols

    def pair_texts(self) -> tuple[list[str], list[str]]:
        """Query texts and document texts of the pairs of `pair_index`."""
        rows, cols = self.pair_index()
        return [self.query_texts[i] for i in rows.tolist()], [
            self.doc_texts[j] for j in cols.tolist()
        ]

    def cross_query_texts(self) -> list[str]:
        """Texts of iq(j, i) = query of record i with instruction of record j, row-major [i, j]."""
        texts = []
        for owner in self.records:
            for donor in self.records:
                swapped = owner.model_copy(update={"instruction": donor.instruction})
                texts.append(record_query_text(swapped, self.template))
        return texts


def group_records(records: Sequence[Record]) -> list[list[int]]:
    """Indices grouped by instance (an orig and its dv records), in order of first appearance.

    An `IndexedRecords` file is grouped from its index, without reading the records.
    """
    if isinstance(records, IndexedRecords):
        keys = records.instance_keys()
    else:
        keys = [instance_key(r.view, r.id, r.parent_id) for r in records]
    groups: dict[str, list[int]] = {}
    for index, key in enumerate(keys):
        groups.setdefault(key, []).append(index)
    return list(groups.values())


def _pack_groups(groups: list[list[int]], batch_size: int) -> list[list[int]]:
    """Fill batches in order, never splitting a group; a group that does not fit waits."""
    batches: list[list[int]] = []
    current: list[int] = []
    waiting: list[list[int]] = []
    for group in groups:
        if len(group) > batch_size:
            raise ConfigError(
                f"batch_size {batch_size} is smaller than a group of {len(group)} views"
            )
        waiting.append(group)
        still: list[list[int]] = []
        for pending in waiting:
            if len(current) + len(pending) <= batch_size:
                current.extend(pending)
            else:
                still.append(pending)
            if len(current) == batch_size:
                batches.append(current)
                current = []
        waiting = still
    for pending in waiting:
        if len(current) + len(pending) > batch_size:
            batches.append(current)
            current = []
        current.extend(pending)
    if current:
        batches.append(current)
    return batches


def _chunk(indices: list[int], batch_size: int) -> list[list[int]]:
    return [indices[i : i + batch_size] for i in range(0, len(indices), batch_size)]


def plan_epoch(
    groups: list[list[int]], batch_size: int, policy: str, seed: int, epoch: int
) -> list[list[int]]:
    """Record indices of every batch of ``epoch`` (deterministic in ``seed`` and ``epoch``)."""
    rng = random.Random(seed * 1_000_003 + epoch)
    if policy == "together":
        shuffled = [list(g) for g in groups]
        rng.shuffle(shuffled)
        for group in shuffled:
            rng.shuffle(group)
        return _pack_groups(shuffled, batch_size)
    if policy == "separate":
        depth = max((len(g) for g in groups), default=0)
        layers = [[g[k] for g in groups if len(g) > k] for k in range(depth)]
        batches = []
        for layer in layers:
            rng.shuffle(layer)
            batches.extend(_chunk(layer, batch_size))
        rng.shuffle(batches)
        return batches
    if policy == "random":
        flat = [i for g in groups for i in g]
        rng.shuffle(flat)
        return _chunk(flat, batch_size)
    raise ConfigError(f"unknown view_policy {policy!r}")


def labelled_documents(record: Record, num_negatives: int) -> list[tuple[Document, int]]:
    """The documents a batch takes of ``record`` with their labels: its positives, then its
    first ``num_negatives`` labelled negatives."""
    return [(d, POSITIVE) for d in record.positives] + [
        (d, NEGATIVE) for d in record.negatives()[:num_negatives]
    ]


def build_batch(
    records: list[Record],
    num_negatives: int,
    template: str,
    teacher: TeacherScores | None = None,
) -> Batch:
    """De-duplicate the documents of ``records`` by id and fill the relation matrix (and,
    with ``teacher``, the teacher score of every pair)."""
    column: dict[str, int] = {}
    doc_texts: list[str] = []
    labelled: list[list[tuple[str, int]]] = []
    for record in records:
        documents = labelled_documents(record, num_negatives)
        row = [(d.id, label) for d, label in documents]
        for doc, _ in documents:
            if doc.id not in column:
                column[doc.id] = len(doc_texts)
                doc_texts.append(doc_text(doc))
        labelled.append(row)
    relations = torch.zeros(len(records), len(doc_texts), dtype=torch.int8)
    for i, row in enumerate(labelled):
        for doc_id, label in row:
            relations[i, column[doc_id]] = label
    batch = Batch(
        records=records,
        query_texts=[record_query_text(r, template) for r in records],
        doc_ids=list(column),
        doc_texts=doc_texts,
        relations=relations,
        template=template,
    )
    if teacher is not None:
        batch.teacher_scores = pair_teacher_scores(batch, teacher)
    return batch


def pair_teacher_scores(batch: Batch, teacher: TeacherScores) -> torch.Tensor:
    """The teacher score of each pair of ``batch.pair_index()``, float32 [P]."""
    rows, cols = batch.pair_index()
    scores = []
    for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
        key = (batch.records[i].id, batch.doc_ids[j])
        if key not in teacher:
            raise ConfigError(
                f"loss.teacher: no teacher score for record {key[0]!r}, document {key[1]!r} "
                "(the scores were computed for other data)"
            )
        scores.append(teacher[key])
    return torch.tensor(scores, dtype=torch.float32)


@dataclass(frozen=True)
class DataPosition:
    """Where training stands in the data: the next batch to run."""

    epoch: int = 0
    batch_index: int = 0


class BatchStream:
    """Batches of a record sequence, epoch after epoch, from any `DataPosition`.

    ``records`` is a list or an `IndexedRecords` file (records read per batch).
    """

    def __init__(
        self,
        records: Sequence[Record],
        batch_size: int,
        policy: str = "together",
        num_negatives: int = 30,
        template: str = "{query} {instruction}",
        seed: int = 0,
        drop_last: bool = True,
        teacher: TeacherScores | None = None,
    ) -> None:
        self.records = records
        self.teacher = teacher
        self.batch_size = batch_size
        self.policy = policy
        self.num_negatives = num_negatives
        self.template = template
        self.seed = seed
        self.drop_last = drop_last
        self.groups = group_records(records)

    def plan(self, epoch: int) -> list[list[int]]:
        batches = plan_epoch(self.groups, self.batch_size, self.policy, self.seed, epoch)
        if self.drop_last:
            batches = [b for b in batches if len(b) == self.batch_size]
        return batches

    @staticmethod
    def start() -> DataPosition:
        """The first batch of the first epoch."""
        return DataPosition()

    def batches_per_epoch(self) -> int:
        return len(self.plan(0))

    def plans(self, start: DataPosition, epochs: int) -> Iterator[tuple[DataPosition, list[int]]]:
        """``(position after this batch, record indices)`` from ``start`` (no record is read)."""
        for epoch in range(start.epoch, epochs):
            plan = self.plan(epoch)
            first = start.batch_index if epoch == start.epoch else 0
            for index in range(first, len(plan)):
                following = (
                    DataPosition(epoch, index + 1)
                    if index + 1 < len(plan)
                    else DataPosition(epoch + 1, 0)
                )
                yield following, plan[index]

    def build(self, indices: list[int]) -> Batch:
        """The batch of the records at ``indices`` (read from disk for an indexed file)."""
        records = [self.records[i] for i in indices]
        return build_batch(records, self.num_negatives, self.template, self.teacher)

    def iterate(self, start: DataPosition, epochs: int) -> Iterator[tuple[DataPosition, Batch]]:
        """Yield ``(position after this batch, batch)`` from ``start`` to the end of ``epochs``."""
        for following, indices in self.plans(start, epochs):
            yield following, self.build(indices)
