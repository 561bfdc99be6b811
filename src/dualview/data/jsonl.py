"""Streaming JSONL: line-numbered errors, atomic and append-only (resumable) writes.

Reading never loads a whole file: every reader is a generator over lines. Two ways to write:

- :class:`AtomicJsonlWriter`: writes to a temporary file beside the target and renames it into
  place on success, so a killed job never leaves a half-written output behind.
- :class:`AppendJsonlWriter`: append-only with ``fsync`` every ``sync_every`` lines, for
  resumable stages. On open it drops a torn last line (a line without its newline, left by a
  kill mid-write), so resuming never duplicates or corrupts a record.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from dualview.data.schema import Record
from dualview.errors import DataError


def iter_json_lines(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for every non-blank line; 1-based line numbers.

    Raises :class:`DataError` naming the file and line for invalid JSON or a non-object line.
    """
    path = _existing(path)
    for line_number, line in _iter_raw_lines(path):
        yield line_number, decode_line(line, path, line_number)


def _existing(path: str | Path) -> Path:
    path = Path(path)
    if not path.exists():
        raise DataError(path, None, "file", "does not exist")
    return path


def decode_line(line: str, path: str | Path, line_number: int) -> dict[str, Any]:
    """One JSONL line as a JSON object, or a located :class:`DataError`."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DataError(path, line_number, "json", f"invalid JSON ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise DataError(path, line_number, "json", "expected a JSON object per line")
    return obj


def validation_error_to_data_error(
    exc: ValidationError, path: str | Path, line: int | None
) -> DataError:
    """The first pydantic error as a :class:`DataError` with a dotted field path."""
    first = exc.errors()[0]
    loc = ".".join(str(part) for part in first["loc"]) or "record"
    message = first["msg"]
    # Model-level validators report at the root; their message starts with the field name.
    if loc == "record" or not first["loc"]:
        head, sep, rest = message.removeprefix("Value error, ").partition(": ")
        loc, message = (head, rest) if sep and " " not in head else ("record", message)
    return DataError(path, line, loc, message.removeprefix("Value error, "))


def parse_record(obj: dict[str, Any], path: str | Path, line: int | None) -> Record:
    """Validate one decoded line as a :class:`Record`, or raise a located :class:`DataError`."""
    try:
        return Record.model_validate(obj)
    except ValidationError as exc:
        raise validation_error_to_data_error(exc, path, line) from None


@dataclass
class RejectLog:
    """Collects invalid lines when reading with ``skip_invalid``; writes them as JSONL.

    Each reject is ``{"file", "line", "field", "reason", "raw"}``.
    """

    path: Path | None = None
    count: int = 0
    _handle: TextIO | None = field(default=None, repr=False)

    def add(self, error: DataError, raw: str | dict[str, Any] | None) -> None:
        self.count += 1
        if self.path is None:
            return
        if self._handle is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._handle = self.path.open("w", encoding="utf-8")
        entry = {
            "file": error.path,
            "line": error.line,
            "field": error.field,
            "reason": error.message,
            "raw": raw,
        }
        self._handle.write(json.dumps(entry, ensure_ascii=False) + "\n")
        self._handle.flush()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def _iter_raw_lines(path: Path) -> Iterator[tuple[int, str]]:
    with path.open("r", encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if line.strip():
                yield line_number, line


def iter_records(
    path: str | Path,
    *,
    skip_invalid: bool = False,
    rejects: RejectLog | None = None,
) -> Iterator[Record]:
    """Stream validated records from a JSONL file.

    Without ``skip_invalid`` the first bad line raises :class:`DataError`. With it, bad lines
    are handed to ``rejects`` (with their reason) and reading goes on.
    """
    path = _existing(path)
    for line_number, line in _iter_raw_lines(path):
        try:
            yield parse_record(decode_line(line, path, line_number), path, line_number)
        except DataError as error:
            if not skip_invalid:
                raise
            if rejects is not None:
                rejects.add(error, line.rstrip("\n"))


def _dump(obj: dict[str, Any] | Record) -> str:
    data = obj.to_json_dict() if isinstance(obj, Record) else obj
    return json.dumps(data, ensure_ascii=False) + "\n"


class AtomicJsonlWriter:
    """Write JSONL to a temp file and rename it over ``path`` only when the block succeeds."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.count = 0
        self._handle: TextIO | None = None
        self._tmp: str | None = None

    def __enter__(self) -> AtomicJsonlWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, self._tmp = tempfile.mkstemp(
            prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent
        )
        self._handle = os.fdopen(fd, "w", encoding="utf-8")
        return self

    def write(self, obj: dict[str, Any] | Record) -> None:
        assert self._handle is not None, "use AtomicJsonlWriter as a context manager"
        self._handle.write(_dump(obj))
        self.count += 1

    def __exit__(self, exc_type, exc, tb) -> None:
        assert self._handle is not None and self._tmp is not None
        if exc_type is None:
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()
            os.replace(self._tmp, self.path)
        else:
            self._handle.close()
            os.unlink(self._tmp)


def write_jsonl(path: str | Path, rows: Iterable[dict[str, Any] | Record]) -> int:
    """Atomically write ``rows`` to ``path``; returns the number of lines written."""
    with AtomicJsonlWriter(path) as writer:
        for row in rows:
            writer.write(row)
    return writer.count


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

    def write(self, obj: dict[str, Any] | Record) -> None:
        self._handle.write(_dump(obj))
        self.count += 1
        if self.count % self.sync_every == 0:
            self.sync()

    def flush(self) -> None:
        """Hand buffered lines to the OS (safe from a process kill; ``sync`` is for power loss)."""
        self._handle.flush()

    def sync(self) -> None:
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        if not self._handle.closed:
            self.sync()
            self._handle.close()

    def __enter__(self) -> AppendJsonlWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()


def count_lines(path: str | Path) -> int:
    """Number of non-blank lines, streamed."""
    return sum(1 for _ in _iter_raw_lines(Path(path)))
