"""Append-only JSONL for resumable stages: fsynced lines, never a torn line left behind.

A kill mid-write leaves at most one line without its newline. `AppendJsonlWriter` removes
it when it opens the file again (`repair_torn_tail`), so resuming never duplicates or
corrupts a record; a last line that is complete JSON without a final newline (an editor's)
is kept and given its newline. A write that fails (a full disk) is undone: the file is cut
back to its size before that write, so no reader ever sees half a line. Readers never
write: `iter_appended_lines` skips a torn last line instead of removing it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dualview.errors import DataError, write_error
from dualview.io.atomic import Row, encode_row
from dualview.io.faults import fault_point
from dualview.io.files import BOM, MAX_LINE_BYTES, decode_line, iter_binary_lines

# Lines handed to the OS at the latest once this many bytes are waiting.
_FLUSH_BYTES = 1 << 20


def is_complete_line(raw: bytes) -> bool:
    """True when ``raw`` (one line, with or without its newline) is a whole JSON object: a
    writer killed mid-line cannot have left one, as an object ends with its last byte."""
    try:
        return isinstance(json.loads(raw.removeprefix(BOM)), dict)
    except (ValueError, RecursionError):
        return False


def _unterminated_tail(path: Path) -> tuple[int, bytes | None] | None:
    """``(offset, bytes)`` of a last line that lacks its newline, or None when the file is
    empty or ends with one; the bytes are None for a line longer than `MAX_LINE_BYTES`
    (which no reader accepts)."""
    with path.open("rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return None
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return None
        start = size - 1
        while start > 0:
            block = max(0, start - 4096)
            handle.seek(block)
            newline = handle.read(start - block).rfind(b"\n")
            if newline != -1:
                start = block + newline + 1
                break
            start = block
        if size - start > MAX_LINE_BYTES:
            return start, None
        handle.seek(start)
        return start, handle.read()


def repair_torn_tail(path: Path) -> int:
    """Make ``path`` end with a newline before appending; returns the bytes removed.

    A last line without its newline is a killed writer's and is cut, unless it is complete
    JSON (`is_complete_line`): then only the newline is added. For writers only.
    """
    if not path.exists():
        return 0
    tail = _unterminated_tail(path)
    if tail is None:
        return 0
    start, data = tail
    with path.open("rb+") as handle:
        if data is not None and is_complete_line(data):
            handle.seek(0, os.SEEK_END)
            handle.write(b"\n")
            removed = 0
        else:
            removed = handle.seek(0, os.SEEK_END) - start
            handle.truncate(start)
        handle.flush()
        os.fsync(handle.fileno())
    return removed


def iter_appended_lines(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line_number, object)`` of an append-only JSONL file, read without writing to it.

    A last line without its newline that is not complete JSON is a writer's torn (or still
    being written) line and is skipped; any other bad line is a located `DataError`.
    """
    path = Path(path)
    for line_number, _, raw in iter_binary_lines(path):
        try:
            yield line_number, decode_line(raw, path, line_number)
        except DataError:
            if raw.endswith(b"\n") or is_complete_line(raw):
                raise


class AppendJsonlWriter:
    """Append-only JSONL for resumable stages; fsyncs every ``sync_every`` lines and on close.

    Lines wait in memory until `flush` or `sync` (or 1 MiB of them) hands them to the OS in
    one go; when that fails (ENOSPC, EIO) the file is cut back to its size before it, so it
    holds only whole lines, and the error is one `DataError` line naming the file.
    """

    def __init__(self, path: str | Path, sync_every: int = 1) -> None:
        self.path = Path(path)
        self.sync_every = max(1, sync_every)
        self.count = 0
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            repair_torn_tail(self.path)
            self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        except OSError as exc:
            raise write_error(self.path, exc) from None

    def write(self, obj: Row) -> None:
        line = encode_row(obj, self.path)
        self._pending.append(line)
        self._pending_bytes += len(line)
        self.count += 1
        fault_point(f"append {self.path.name}")
        if self.count % self.sync_every == 0:
            self.sync()
        elif self._pending_bytes >= _FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        """Hand waiting lines to the OS (safe from a process kill; ``sync`` is for power loss)."""
        self._write_out(sync=False)

    def sync(self) -> None:
        """Hand waiting lines to the OS and fsync the file."""
        self._write_out(sync=True)

    def _write_out(self, sync: bool) -> None:
        """Append the waiting lines (and fsync); on failure cut the file back and raise."""
        assert self._fd is not None, "AppendJsonlWriter is closed"
        data = b"".join(self._pending)
        self._pending.clear()
        self._pending_bytes = 0
        start = None
        try:
            start = os.fstat(self._fd).st_size
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
            if sync:
                os.fsync(self._fd)
        except OSError as exc:
            if start is not None:
                self._cut_back(start)
            raise write_error(self.path, exc) from None

    def _cut_back(self, size: int) -> None:
        """Undo a failed append: the file back to ``size`` bytes (best effort)."""
        assert self._fd is not None
        try:
            os.ftruncate(self._fd, size)
            os.fsync(self._fd)
        except OSError:
            pass  # the next writer's `repair_torn_tail` removes what is left

    def close(self) -> None:
        if self._fd is None:
            return
        try:
            self.sync()
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> AppendJsonlWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()
