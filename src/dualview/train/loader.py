"""Batches read, built and tokenized ahead of the training step, in DataLoader workers.

Reading a batch's records from the offset index, de-duplicating its documents and tokenizing
~1,000 passages takes about a second of CPU per paper-scale step; done in the training loop,
the GPU waits for it (twice, when GradCache re-tokenized for its second pass). Here worker
processes do it ahead of time:

- worker ``w`` of ``W`` builds the batches whose index in the run is ``w`` modulo ``W``, and
  the DataLoader hands them out round-robin, so the order is exactly the order of
  :meth:`BatchStream.iterate` (a resumed run replays the same batches);
- each batch carries its token ids (:class:`~dualview.train.tokens.TokenizedTexts`) per text
  group, so the step pads chunks and never tokenizes;
- workers ignore SIGTERM: the main process receives it, checkpoints, and shuts them down.

``num_workers=0`` does the same work in the main process, batch by batch.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from typing import Any

from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from dualview.train.batching import Batch, BatchStream, DataPosition
from dualview.train.model import tokenize_texts

#: Maps a batch to its text groups: name -> (texts, "query" | "document").
GroupsOf = Callable[[Batch], dict[str, tuple[list[str], str]]]


def _ignore_sigterm(_worker_id: int) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _identity(item: Any) -> Any:
    return item


class BatchTokenizer:
    """Attach token ids of every text group to a batch (runs in a worker process)."""

    def __init__(self, tokenizer: Any, max_lengths: dict[str, int], groups_of: GroupsOf) -> None:
        self.tokenizer = tokenizer
        self.max_lengths = max_lengths
        self.groups_of = groups_of

    def __call__(self, batch: Batch) -> Batch:
        batch.tokens = {
            name: tokenize_texts(self.tokenizer, texts, self.max_lengths[kind])
            for name, (texts, kind) in self.groups_of(batch).items()
        }
        return batch


class PreparedBatches(IterableDataset):
    """The batches of ``stream`` from ``start``, built and tokenized; sharded over workers."""

    def __init__(
        self, stream: BatchStream, start: DataPosition, epochs: int, prepare: BatchTokenizer
    ) -> None:
        self.stream = stream
        self.start = start
        self.epochs = epochs
        self.prepare = prepare

    def __iter__(self) -> Iterator[tuple[DataPosition, Batch]]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info else (0, 1)
        for number, (following, indices) in enumerate(self.stream.plans(self.start, self.epochs)):
            if number % workers == worker:
                yield following, self.prepare(self.stream.build(indices))


def prepared_batches(
    stream: BatchStream,
    start: DataPosition,
    epochs: int,
    prepare: BatchTokenizer,
    num_workers: int = 0,
    prefetch: int = 2,
) -> Iterator[tuple[DataPosition, Batch]]:
    """``(position after the batch, tokenized batch)`` in run order, prepared ahead."""
    dataset = PreparedBatches(stream, start, epochs, prepare)
    if num_workers == 0:
        yield from dataset
        return
    loader = DataLoader(
        dataset,
        batch_size=None,
        num_workers=num_workers,
        prefetch_factor=prefetch,
        collate_fn=_identity,
        worker_init_fn=_ignore_sigterm,
        multiprocessing_context="fork" if "fork" in _start_methods() else None,
    )
    yield from loader


def _start_methods() -> list[str]:
    import multiprocessing

    return multiprocessing.get_all_start_methods()
