"""Append-only JSONL for resumable stages: fsynced lines, a torn last line dropped on open.

A kill mid-write leaves at most one line without its newline; `AppendJsonlWriter` removes it
when it opens the file again, so resuming never duplicates or corrupts a record.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TextIO

from dualview.errors import write_error
from dualview.io.atomic import Row, write_row
from dualview.io.faults import fault_point


def repair_torn_tail(path: Path) -> int:
    """Drop a trailing line that lacks its newline (a kill mid-write); returns bytes removed."""
    if not path.exists() or path.stat().st_size == 0:
        return 0
    with path.open("rb+") as handle:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return 0
        # Walk back to the previous newline.
        position = size - 1
        chunk = 4096
        while position > 0:
            start = max(0, position - chunk)
            handle.seek(start)
            data = handle.read(position - start)
            newline = data.rfind(b"\n")
            if newline != -1:
                keep = start + newline + 1
                handle.truncate(keep)
                return size - keep
            position = start
        handle.truncate(0)
        return size


class AppendJsonlWriter:
    """Append-only JSONL for resumable stages; fsyncs every ``sync_every`` lines and on close."""

    def __init__(self, path: str | Path, sync_every: int = 1) -> None:
        self.path = Path(path)
        self.sync_every = max(1, sync_every)
        self.count = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repair_torn_tail(self.path)
        self._handle: TextIO = self.path.open("a", encoding="utf-8")

    def write(self, obj: Row) -> None:
        write_row(self._handle, self.path, obj)
        self.count += 1
        fault_point(f"append {self.path.name}")
        if self.count % self.sync_every == 0:
            self.sync()

    def flush(self) -> None:
        """Hand buffered lines to the OS (safe from a process kill; ``sync`` is for power loss)."""
        try:
            self._handle.flush()
        except OSError as exc:
            raise write_error(self.path, exc) from None

    def sync(self) -> None:
        try:
            self._handle.flush()
            os.fsync(self._handle.fileno())
        except OSError as exc:
            raise write_error(self.path, exc) from None

    def close(self) -> None:
        if not self._handle.closed:
            self.sync()
            self._handle.close()

    def __enter__(self) -> AppendJsonlWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()
