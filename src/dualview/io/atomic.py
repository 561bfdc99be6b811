"""Atomic writes: a temporary file beside the target, fsynced and renamed into place.

A killed or failing writer (a full disk included) never leaves a half-written output: the
previous file stays as it was. `AtomicJsonlWriter` streams JSONL the same way.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, TextIO

from dualview.errors import DataError, write_error
from dualview.io.faults import fault_point


class JsonRow(Protocol):
    """A row object that knows its JSON form (a `dualview.data.schema.Record`)."""

    def to_json_dict(self) -> dict[str, Any]: ...


Row = dict[str, Any] | JsonRow

# The process's file-creation mask, read once (reading it means setting it).
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def dump_row(obj: Row) -> str:
    """One JSONL line (with its newline) of a dict or a row object."""
    data = obj if isinstance(obj, dict) else obj.to_json_dict()
    return json.dumps(data, ensure_ascii=False) + "\n"


def encode_row(obj: Row, path: Path) -> bytes:
    """`dump_row` as UTF-8; text that is not Unicode (a lone surrogate) is a `DataError`."""
    try:
        return dump_row(obj).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise not_unicode(path, exc) from None


def not_unicode(path: str | Path, exc: UnicodeEncodeError) -> DataError:
    """Text to write holds a lone surrogate (from no file dualview reads: they refuse it)."""
    code = ord(exc.object[exc.start])
    return DataError(path, None, "write", f"lone surrogate \\u{code:04x} in the text; not written")


def write_row(handle: TextIO, path: Path, obj: Row) -> None:
    """Write ``obj`` as one JSONL line to ``handle``; an OS error names ``path``."""
    try:
        handle.write(dump_row(obj))
    except OSError as exc:
        raise write_error(path, exc) from None
    except UnicodeEncodeError as exc:  # encoded before anything is written
        raise not_unicode(path, exc) from None


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` that replaces it only when the block succeeds.

    For writers that want a file name (``savefig``, ``torch.save``, Parquet): the data is
    fsynced and renamed over ``path``; on any error (a full disk included) the temporary
    file is removed and the previous ``path`` stays as it was. OS errors become a
    one-line `DataError` naming ``path``.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Temporaries a killed writer left behind (one writer per folder: none is live).
        for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
            stale.unlink(missing_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp's 0600 would make every output private
        os.close(fd)
    except OSError as exc:
        raise write_error(path, exc) from None
    tmp = Path(name)
    try:
        yield tmp
        fsync_path(tmp)
        fault_point(f"replace {path.name}")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise write_error(path, exc) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def fsync_path(path: Path) -> None:
    """Flush ``path`` (a file or a folder) to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_copy(source: str | Path, path: str | Path) -> None:
    """Copy ``source`` to ``path`` atomically (see `atomic_path`)."""
    with atomic_path(path) as tmp:
        shutil.copyfile(source, tmp)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (see `atomic_path`)."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise not_unicode(path, exc) from None
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_json(path: str | Path, data: Any, indent: int | None = 2) -> None:
    """Write ``data`` as JSON to ``path`` atomically; strict (no NaN), keys as given."""
    atomic_write_text(path, json.dumps(data, indent=indent, ensure_ascii=False) + "\n")


class AtomicJsonlWriter:
    """Write JSONL to a temp file and rename it over ``path`` only when the block succeeds."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.count = 0
        self._handle: TextIO | None = None
        self._context: Any = None

    def __enter__(self) -> AtomicJsonlWriter:
        self._context = atomic_path(self.path)
        tmp = self._context.__enter__()
        self._handle = tmp.open("w", encoding="utf-8")
        return self

    def write(self, obj: Row) -> None:
        assert self._handle is not None, "use AtomicJsonlWriter as a context manager"
        write_row(self._handle, self.path, obj)
        self.count += 1
        fault_point(f"record {self.path.name}")

    def __exit__(self, exc_type, exc, tb) -> bool | None:
        assert self._handle is not None and self._context is not None
        try:
            self._handle.close()  # flushes: a full disk shows here at the latest
        except OSError as error:
            if exc_type is None:
                exc_type, exc, tb = type(error), error, error.__traceback__
        return self._context.__exit__(exc_type, exc, tb)


def write_jsonl(path: str | Path, rows: Iterable[Row]) -> int:
    """Atomically write ``rows`` to ``path``; returns the number of lines written."""
    with AtomicJsonlWriter(path) as writer:
        for row in rows:
            writer.write(row)
    return writer.count
