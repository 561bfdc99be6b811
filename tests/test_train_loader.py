"""Batches prepared in background threads arrive in run order, tokenized, from any position."""

from __future__ import annotations

import functools
import threading
import time
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from dualview.data.record_index import IndexedRecords
from dualview.models.tokens import tokenize_texts
from dualview.resources import embedded_encoder_path
from dualview.train.batching import BatchStream, DataPosition
from dualview.train.loader import BatchTokenizer, prepared_batches
from dualview.train.objectives import RelationInfoNCE
from dualview.train.step import text_groups

GOLD = Path(__file__).resolve().parents[1] / "src" / "dualview" / "data" / "gold" / "train.jsonl"
LENGTHS = {"query": 32, "document": 64}


@pytest.fixture(scope="module")
def prepare() -> BatchTokenizer:
    tokenizer = AutoTokenizer.from_pretrained(str(embedded_encoder_path()))
    groups = functools.partial(text_groups, loss_fn=RelationInfoNCE())
    return BatchTokenizer(tokenizer, LENGTHS, groups)


def _stream() -> BatchStream:
    return BatchStream(IndexedRecords(GOLD), batch_size=6, num_negatives=4, seed=3)


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("start", [DataPosition(), DataPosition(1, 2)])
def test_threads_give_the_stream_order(prepare, workers: int, start: DataPosition) -> None:
    stream = _stream()
    expected = list(stream.iterate(start, epochs=2))
    got = list(prepared_batches(stream, start, 2, prepare, num_workers=workers, prefetch=1))
    assert len(got) == len(expected) > 3
    for (pos_a, a), (pos_b, b) in zip(got, expected, strict=True):
        assert pos_a == pos_b
        assert [r.id for r in a.records] == [r.id for r in b.records]
        assert a.doc_texts == b.doc_texts
        ref = tokenize_texts(prepare.tokenizer, b.doc_texts, LENGTHS["document"])
        assert a.tokens["documents"].lengths.tolist() == ref.lengths.tolist()
        assert a.tokens["documents"].ids.tolist() == ref.ids.tolist()
        assert len(a.tokens["queries"]) == len(b.query_texts)


def test_a_worker_error_reaches_the_consumer(prepare) -> None:
    class Broken(BatchTokenizer):
        def __call__(self, batch):
            raise ValueError("broken preparation")

        def copy(self):
            return self

    broken = Broken(prepare.tokenizer, LENGTHS, prepare.groups_of)
    with pytest.raises(ValueError, match="broken preparation"):
        list(prepared_batches(_stream(), DataPosition(), 1, broken, num_workers=2))


def test_stopping_early_joins_the_worker_threads(prepare) -> None:
    """A consumer that stops mid-run leaves no worker inside the tokenizer: a daemon thread
    still there when the interpreter finalizes aborts the process (SIGABRT, not 143)."""

    class Slow(BatchTokenizer):
        def __call__(self, batch):
            time.sleep(0.3)  # the worker is mid-preparation when the consumer stops
            return super().__call__(batch)

        def copy(self):
            return Slow(prepare.tokenizer, LENGTHS, prepare.groups_of)

    slow = Slow(prepare.tokenizer, LENGTHS, prepare.groups_of)
    batches = prepared_batches(_stream(), DataPosition(), 2, slow, num_workers=2, prefetch=2)
    next(batches)
    batches.close()
    assert not [t for t in threading.enumerate() if t.name == "dualview-batches"]
