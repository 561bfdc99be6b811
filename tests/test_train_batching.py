"""Batching: views co-batched, documents de-duplicated, relation matrix per record."""

from __future__ import annotations

from pathlib import Path

import pytest

from dualview.data.jsonl import iter_records
from dualview.data.record_index import IndexedRecords
from dualview.data.schema import Document, Record
from dualview.errors import DataError
from dualview.train.batching import (
    BatchStream,
    DataPosition,
    build_batch,
    group_records,
    plan_epoch,
)

FIXTURE = Path(__file__).parent / "fixtures" / "train" / "dv_small.jsonl"


@pytest.fixture(scope="module")
def records() -> list[Record]:
    return list(iter_records(FIXTURE))


def _doc(i: str) -> Document:
    return Document(id=i, text=f"text {i}")


def test_groups_pair_orig_with_its_dv(records: list[Record]) -> None:
    groups = group_records(records)
    assert len(groups) == 8
    for group in groups:
        orig, dv = (records[i] for i in group)
        assert orig.view == "orig" and dv.parent_id == orig.id


@pytest.mark.parametrize("batch_size", [2, 3, 4, 5])
def test_together_never_splits_a_pair(records: list[Record], batch_size: int) -> None:
    batches = plan_epoch(group_records(records), batch_size, "together", seed=1, epoch=0)
    assert sorted(i for b in batches for i in b) == list(range(len(records)))
    assert all(len(b) <= batch_size for b in batches)
    where = {i: n for n, b in enumerate(batches) for i in b}
    for group in group_records(records):
        assert len({where[i] for i in group}) == 1


def test_separate_never_joins_a_pair(records: list[Record]) -> None:
    batches = plan_epoch(group_records(records), 4, "separate", seed=3, epoch=2)
    assert sorted(i for b in batches for i in b) == list(range(len(records)))
    where = {i: n for n, b in enumerate(batches) for i in b}
    for group in group_records(records):
        assert len({where[i] for i in group}) == 2


def test_random_is_a_permutation_and_depends_on_epoch(records: list[Record]) -> None:
    groups = group_records(records)
    first = plan_epoch(groups, 4, "random", seed=0, epoch=0)
    assert sorted(i for b in first for i in b) == list(range(len(records)))
    assert first == plan_epoch(groups, 4, "random", seed=0, epoch=0)
    assert first != plan_epoch(groups, 4, "random", seed=0, epoch=1)


def test_dual_view_documents_encoded_once_with_swapped_labels(records: list[Record]) -> None:
    orig, dv = records[0], records[1]
    batch = build_batch([orig, dv], num_negatives=30, template="{query} {instruction}")
    assert len(batch.doc_ids) == len(set(batch.doc_ids)) == len(orig.documents())
    col = {d: j for j, d in enumerate(batch.doc_ids)}
    p_plus, n_star = orig.positives[0].id, orig.instruction_negatives[0].id
    assert batch.relations[0, col[p_plus]] == 1 and batch.relations[1, col[p_plus]] == -1
    assert batch.relations[0, col[n_star]] == -1 and batch.relations[1, col[n_star]] == 1
    assert batch.query_texts[0] == f"{orig.query} {orig.instruction}"


def test_unlabelled_documents_are_zero_and_negatives_truncated() -> None:
    a = Record(
        id="a",
        view="plain",
        query="q1",
        positives=[_doc("p1")],
        hard_negatives=[_doc("n1"), _doc("n2"), _doc("n3")],
    )
    b = Record(
        id="b", view="plain", query="q2", positives=[_doc("p2")], hard_negatives=[_doc("n1")]
    )
    batch = build_batch([a, b], num_negatives=2, template="{query} {instruction}")
    assert batch.doc_ids == ["p1", "n1", "n2", "p2"]
    assert batch.relations.tolist() == [[1, -1, -1, 0], [0, -1, 0, 1]]
    assert batch.query_texts == ["q1", "q2"]


def test_cross_query_texts_swap_instructions(records: list[Record]) -> None:
    batch = build_batch(records[:2], 30, "{instruction} || {query}")
    texts = batch.cross_query_texts()
    assert texts[1] == f"{records[1].instruction} || {records[0].query}"
    assert texts[0] == batch.query_texts[0] and texts[3] == batch.query_texts[1]


def test_stream_resumes_from_a_position(records: list[Record]) -> None:
    stream = BatchStream(records, batch_size=4, seed=5)
    full = [(pos, b.query_texts) for pos, b in stream.iterate(DataPosition(), epochs=2)]
    assert len(full) == 2 * stream.batches_per_epoch()
    cut = 5
    resumed = [(pos, b.query_texts) for pos, b in stream.iterate(full[cut - 1][0], epochs=2)]
    assert resumed == full[cut:]


def test_indexed_file_gives_the_same_batches_as_the_list(records: list[Record]) -> None:
    indexed = IndexedRecords(FIXTURE)
    assert len(indexed) == len(records)
    assert indexed[3] == records[3] and indexed[1:3] == records[1:3]
    assert group_records(indexed) == group_records(records)
    in_memory = BatchStream(records, batch_size=4, seed=5)
    from_disk = BatchStream(indexed, batch_size=4, seed=5)
    for (pos_a, a), (pos_b, b) in zip(
        in_memory.iterate(DataPosition(), epochs=2),
        from_disk.iterate(DataPosition(), epochs=2),
        strict=True,
    ):
        assert pos_a == pos_b
        assert a.query_texts == b.query_texts and a.doc_ids == b.doc_ids
        assert a.relations.equal(b.relations)
    indexed.close()


def test_indexed_file_reports_a_bad_line(tmp_path: Path) -> None:
    lines = FIXTURE.read_text().splitlines()
    lines[2] = lines[2].replace('"query"', '"qeury"', 1)
    bad = tmp_path / "train.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"train.jsonl:3"):
        IndexedRecords(bad)
