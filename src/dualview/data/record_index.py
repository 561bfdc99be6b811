"""An offset index over JSONL record files: pick records by id without holding them in memory.

One streaming pass validates every line (same errors as `dualview.data.jsonl.iter_records`),
hashes each file, and keeps per record only what selection needs (id, view, links, file offset).
`RecordIndex.load` reads one record back by seeking to its line. Paper-scale inputs
(about a million records with 30 negatives each) thus cost memory per id, not per passage.
"""

from __future__ import annotations

import hashlib
import os
import random
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, overload

from dualview.data.jsonl import parse_record
from dualview.data.negatives import KnownPositives
from dualview.data.schema import Document, Record
from dualview.errors import DataError
from dualview.io.files import decode_line, iter_binary_lines


@dataclass(frozen=True)
class Entry:
    """Where one record lives and how it links to others."""

    source: int
    offset: int
    line: int
    id: str
    view: str
    parent_id: str | None
    counterpart_id: str | None


@dataclass
class SourceInfo:
    """One input file: path, sha256 of its bytes, size, records per view."""

    path: Path
    sha256: str = ""
    bytes: int = 0
    views: Counter = field(default_factory=Counter)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "sha256": self.sha256,
            "bytes": self.bytes,
            "records": sum(self.views.values()),
            "views": dict(sorted(self.views.items())),
        }


def _iter_lines(path: Path, info: SourceInfo) -> Iterator[tuple[int, int, bytes]]:
    """``(line_number, byte_offset, raw_line)`` of non-blank lines; fills ``info`` hash/size."""
    digest = hashlib.sha256()
    size = 0

    def account(raw: bytes) -> None:
        nonlocal size
        digest.update(raw)
        size += len(raw)

    yield from iter_binary_lines(path, on_bytes=account)
    info.sha256 = digest.hexdigest()
    info.bytes = size


class RecordIndex:
    """Index of records across files; see module docstring.

    Args:
        paths: JSONL record files (any mix of views).
        pool_size: size of a seeded reservoir sample of documents (for random padding).
        seed: seed of that reservoir.
        on_record: called with every validated record during the pass (e.g. statistics).
        track_positives: fill `known_positives` (needed to select negatives, not to
            read records back).
    """

    def __init__(
        self,
        paths: Sequence[str | Path],
        pool_size: int = 0,
        seed: int = 0,
        on_record: Callable[[Record], None] | None = None,
        track_positives: bool = True,
    ) -> None:
        self.sources = [SourceInfo(Path(p)) for p in paths]
        self._track_positives = track_positives
        self.entries: dict[str, Entry] = {}
        self.known_positives = KnownPositives()
        self.pool: list[Document] = []
        self._pool_size = pool_size
        self._pool_seen = 0
        self._rng = random.Random(seed)
        self._handles: dict[tuple[int, int], dict[int, BinaryIO]] = {}
        self._handles_lock = threading.Lock()
        for number, info in enumerate(self.sources):
            self._scan(number, info, on_record)

    def _scan(
        self, number: int, info: SourceInfo, on_record: Callable[[Record], None] | None
    ) -> None:
        for line, offset, raw in _iter_lines(info.path, info):
            record = parse_record(decode_line(raw, info.path, line), info.path, line)
            if record.id in self.entries:
                first = self.entries[record.id]
                raise DataError(
                    info.path,
                    line,
                    "id",
                    f"record id {record.id!r} already seen at "
                    f"{self.sources[first.source].path}:{first.line}",
                )
            counterpart = record.meta.get("counterpart_id")
            self.entries[record.id] = Entry(
                number,
                offset,
                line,
                record.id,
                record.view,
                record.parent_id,
                str(counterpart) if counterpart else None,
            )
            info.views[record.view] += 1
            if self._track_positives:
                self.known_positives.add_record(record)
            self._sample_documents(record)
            if on_record is not None:
                on_record(record)

    def _sample_documents(self, record: Record) -> None:
        """Reservoir sampling (algorithm R) over every document of every record."""
        if self._pool_size <= 0:
            return
        for doc in record.documents():
            self._pool_seen += 1
            if len(self.pool) < self._pool_size:
                self.pool.append(doc)
            else:
                slot = self._rng.randrange(self._pool_seen)
                if slot < self._pool_size:
                    self.pool[slot] = doc

    def load(self, entry: Entry) -> Record:
        """Read one record back from its file."""
        info = self.sources[entry.source]
        handles = self._thread_handles()
        handle = handles.get(entry.source)
        if handle is None:
            handle = handles[entry.source] = info.path.open("rb")
        handle.seek(entry.offset)
        raw = handle.readline()
        return parse_record(decode_line(raw, info.path, entry.line), info.path, entry.line)

    def _thread_handles(self) -> dict[int, BinaryIO]:
        """This thread's open files: a seek in one thread (or a forked process) must not move
        another's read position."""
        key = (os.getpid(), threading.get_ident())
        with self._handles_lock:
            return self._handles.setdefault(key, {})

    def by_view(self, view: str) -> list[Entry]:
        """Entries of one view, in input order."""
        return [e for e in self.entries.values() if e.view == view]

    def close(self) -> None:
        with self._handles_lock:
            for handles in self._handles.values():
                for handle in handles.values():
                    handle.close()
            self._handles.clear()

    def __enter__(self) -> RecordIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def instance_key(view: str, record_id: str, parent_id: str | None) -> str:
    """The instance a record belongs to: a ``dv`` record joins its parent's instance."""
    return parent_id if view == "dv" and parent_id else record_id


class IndexedRecords(Sequence[Record]):
    """The records of one JSONL file as a sequence, read from disk on access.

    Training needs random access by position (the batch plan of an epoch) but only ids and
    links to plan; holding every record with its ~30 passages in memory would cost tens of GB
    at paper scale (and once per process). ``records[i]`` seeks to line ``i`` and parses it.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._index = RecordIndex([self.path], track_positives=False)
        self._entries = list(self._index.entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    @overload
    def __getitem__(self, position: int) -> Record: ...
    @overload
    def __getitem__(self, position: slice) -> list[Record]: ...
    def __getitem__(self, position: int | slice) -> Record | list[Record]:
        if isinstance(position, slice):
            return [self._index.load(e) for e in self._entries[position]]
        return self._index.load(self._entries[position])

    def instance_keys(self) -> list[str]:
        """`instance_key` of every record, from the index (no record is read)."""
        return [instance_key(e.view, e.id, e.parent_id) for e in self._entries]

    def close(self) -> None:
        self._index.close()
