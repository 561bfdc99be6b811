"""Batches read, built and tokenized ahead of the training step, in background threads.

Reading a batch's records from the offset index, de-duplicating its documents and tokenizing
~1,000 passages takes about a second of CPU per paper-scale step; done in the training loop,
the GPU waits for it (twice, when GradCache re-tokenized for its second pass). Here
``num_workers`` threads do it ahead of time, each up to ``prefetch`` batches ahead:

- worker ``w`` of ``W`` prepares the batches whose index in the run is ``w`` modulo ``W``,
  and the consumer takes them round-robin, so the order is exactly the order of
  `BatchStream.iterate` (a resumed run replays the same batches);
- each batch carries its token ids (`dualview.models.tokens.TokenizedTexts`) per text
  group, so the step pads chunks and never tokenizes.

Threads, not processes: the tokenizer's Rust core releases the GIL while it encodes, and the
training thread mostly waits on the GPU. Forked DataLoader workers were tried first: started
after CUDA initialisation, with the progress bar's thread alive, the run stalled on an H100
(a fork of a multi-threaded process may inherit a held lock); spawned ones would re-import
torch and pickle the record index in every worker.

``num_workers=0`` does the same work in the training loop, batch by batch.

When the consumer stops early (SIGTERM, an error), the workers are told to stop and joined
before the generator returns: a daemon thread still inside the tokenizer's Rust code when the
interpreter finalizes is unwound by ``pthread_exit`` through frames that cannot unwind, and the
process dies of SIGABRT instead of exiting with its own status.
"""

from __future__ import annotations

import copy
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

from dualview.models.tokens import tokenize_texts
from dualview.train.batching import Batch, BatchStream, DataPosition

#: Maps a batch to its text groups: name -> (texts, "query" | "document").
GroupsOf = Callable[[Batch], dict[str, tuple[list[str], str]]]


class BatchTokenizer:
    """Attach token ids of every text group to a batch (runs in a worker process)."""

    def __init__(self, tokenizer: Any, max_lengths: dict[str, int], groups_of: GroupsOf) -> None:
        self.tokenizer = tokenizer
        self.max_lengths = max_lengths
        self.groups_of = groups_of

    def copy(self) -> BatchTokenizer:
        """The same preparation with its own tokenizer: a fast tokenizer changes its truncation
        settings per call, so threads must not share one."""
        return BatchTokenizer(copy.deepcopy(self.tokenizer), self.max_lengths, self.groups_of)

    def __call__(self, batch: Batch) -> Batch:
        batch.tokens = {
            name: tokenize_texts(self.tokenizer, texts, self.max_lengths[kind])
            for name, (texts, kind) in self.groups_of(batch).items()
        }
        return batch


class PairTokenizer:
    """Attach the token ids of a batch's (query, document) pairs for a reranker
    (`dualview.train.rerank_step`); the reranker's ``tokenize_pairs`` is thread-safe."""

    def __init__(self, tokenize_pairs: Callable[[list[str], list[str]], Any]) -> None:
        self.tokenize_pairs = tokenize_pairs

    def copy(self) -> PairTokenizer:
        return self

    def __call__(self, batch: Batch) -> Batch:
        batch.tokens = {"pairs": self.tokenize_pairs(*batch.pair_texts())}
        return batch


def _plans_of_worker(
    stream: BatchStream, start: DataPosition, epochs: int, worker: int, workers: int
) -> Iterator[tuple[DataPosition, list[int]]]:
    for number, item in enumerate(stream.plans(start, epochs)):
        if number % workers == worker:
            yield item


_DONE = object()

#: Seconds to wait for a stopped worker to finish the batch it is preparing.
JOIN_TIMEOUT_S = 120.0


class _Worker(threading.Thread):
    """Prepares every ``workers``-th batch into its own bounded queue."""

    def __init__(self, items: Iterator, stream: BatchStream, prepare, prefetch: int) -> None:
        super().__init__(daemon=True, name="dualview-batches")
        self.items = items
        self.stream = stream
        self.prepare = prepare
        self.out: queue.Queue = queue.Queue(maxsize=prefetch)
        self.stopped = threading.Event()

    def run(self) -> None:
        try:
            for following, indices in self.items:
                if self.stopped.is_set():
                    return
                self._put((following, self.prepare(self.stream.build(indices))))
            self._put(_DONE)
        except BaseException as exc:  # handed to the consumer, raised there
            self._put(exc)

    def _put(self, item: Any) -> None:
        while not self.stopped.is_set():
            try:
                self.out.put(item, timeout=0.1)
                return
            except queue.Full:
                continue


def prepared_batches(
    stream: BatchStream,
    start: DataPosition,
    epochs: int,
    prepare: BatchTokenizer | PairTokenizer,
    num_workers: int = 0,
    prefetch: int = 2,
) -> Iterator[tuple[DataPosition, Batch]]:
    """``(position after the batch, tokenized batch)`` in run order, prepared ahead."""
    if num_workers == 0:
        for following, indices in stream.plans(start, epochs):
            yield following, prepare(stream.build(indices))
        return
    workers = [
        _Worker(
            _plans_of_worker(stream, start, epochs, w, num_workers),
            stream,
            prepare.copy(),
            prefetch,
        )
        for w in range(num_workers)
    ]
    for worker in workers:
        worker.start()
    try:
        while True:
            for worker in workers:
                item = worker.out.get()
                if item is _DONE:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
    finally:
        stop_workers(workers)


def stop_workers(workers: list[_Worker], timeout: float = JOIN_TIMEOUT_S) -> None:
    """Tell every worker to stop and wait until each has left its current batch."""
    for worker in workers:
        worker.stopped.set()
    for worker in workers:
        worker.join(timeout)
