"""Streaming JSONL: line-numbered errors, atomic and append-only (resumable) writes.

Reading never loads a whole file: every reader is a generator over lines. Two ways to write:

- `AtomicJsonlWriter`: writes to a temporary file beside the target and renames it into
  place on success, so a killed job never leaves a half-written output behind.
- `AppendJsonlWriter`: append-only with ``fsync`` every ``sync_every`` lines, for
  resumable stages. On open it drops a torn last line (a line without its newline, left by a
  kill mid-write), so resuming never duplicates or corrupts a record.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from pydantic import ValidationError

from dualview.data.schema import Record
from dualview.errors import DataError, input_error, write_error


def iter_json_lines(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for every non-blank line; 1-based line numbers.

    Raises `DataError` naming the file and line for invalid JSON or a non-object line.
    """
    path = Path(path)
    for line_number, line in _iter_raw_lines(path):
        yield line_number, decode_line(line, path, line_number)


# The longest line any reader accepts: a longer one is an error, never a memory blow-up.
MAX_LINE_BYTES = int(os.environ.get("DUALVIEW_MAX_LINE_BYTES", 32 << 20))
BOM = b"\xef\xbb\xbf"


def open_input(path: str | Path) -> BinaryIO:
    """Open a user's input file for reading (binary); every OS failure as a `DataError`.

    A missing file, a folder, an unreadable file or a symlink loop is one clear line naming
    the path, never a traceback. All readers of user files open them through here.
    """
    path = Path(path)
    try:
        return path.open("rb")
    except OSError as exc:
        raise input_error(path, exc) from None


def iter_binary_lines(
    path: str | Path, on_bytes: Callable[[bytes], object] | None = None
) -> Iterator[tuple[int, int, bytes]]:
    """``(line_number, byte_offset, raw_line)`` of every non-blank line, streamed.

    A UTF-8 byte-order mark at the start is skipped (offsets point past it); CRLF endings
    stay in ``raw_line`` (JSON and `decode_text` treat ``\\r`` as whitespace). A line
    longer than `MAX_LINE_BYTES` is a `DataError`. ``on_bytes`` sees every byte
    read, blank lines and BOM included (e.g. to hash the file in the same pass).
    """
    path = Path(path)
    with open_input(path) as handle:
        offset = 0
        line_number = 0
        while True:
            try:
                raw = handle.readline(MAX_LINE_BYTES + 1)
            except OSError as exc:
                raise input_error(path, exc) from None
            if not raw:
                return
            line_number += 1
            if on_bytes is not None:
                on_bytes(raw)
            if len(raw) > MAX_LINE_BYTES:
                limit = f"{MAX_LINE_BYTES / (1 << 20):g} MiB"
                raise DataError(path, line_number, "line", f"longer than {limit}")
            if line_number == 1 and raw.startswith(BOM):
                raw, offset = raw[len(BOM) :], len(BOM)
            if raw.strip():
                yield line_number, offset, raw
            offset += len(raw)


def decode_text(raw: bytes, path: str | Path, line_number: int | None) -> str:
    """``raw`` as UTF-8 text, or a located `DataError` naming the bad byte."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if line_number is None:  # a whole file: name the line of the bad byte
            line_number = raw.count(b"\n", 0, exc.start) + 1
        raise DataError(path, line_number, "encoding", "not valid UTF-8") from None


def read_input_text(path: str | Path) -> str:
    """A whole (small) user file as text: BOM dropped, CRLF as LF, errors located."""
    path = Path(path)
    with open_input(path) as handle:
        try:
            raw = handle.read()
        except OSError as exc:
            raise input_error(path, exc) from None
    return decode_text(raw.removeprefix(BOM), path, None).replace("\r\n", "\n")


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def decode_line(line: str | bytes, path: str | Path, line_number: int) -> dict[str, Any]:
    """One JSONL line as a JSON object, or a located `DataError`.

    Strict JSON: ``NaN`` and ``Infinity`` (which Python's json would accept) are errors.
    """
    if isinstance(line, bytes):
        line = decode_text(line, path, line_number)
    try:
        obj = json.loads(line, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise DataError(path, line_number, "json", f"invalid JSON ({exc.msg})") from None
    except (ValueError, RecursionError) as exc:
        raise DataError(path, line_number, "json", f"invalid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise DataError(path, line_number, "json", "expected a JSON object per line")
    return obj


def read_json_file(path: str | Path) -> Any:
    """A whole JSON file (a stats, index or results file), strict, with located errors."""
    path = Path(path)
    text = read_input_text(path)
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise DataError(path, exc.lineno, "json", f"invalid JSON ({exc.msg})") from None
    except (ValueError, RecursionError) as exc:
        raise DataError(path, None, "json", f"invalid JSON ({exc})") from None


def validation_error_to_data_error(
    exc: ValidationError, path: str | Path, line: int | None
) -> DataError:
    """The first pydantic error as a `DataError` with a dotted field path."""
    first = exc.errors()[0]
    loc = ".".join(str(part) for part in first["loc"]) or "record"
    message = first["msg"]
    # Model-level validators report at the root; their message starts with the field name.
    if loc == "record" or not first["loc"]:
        head, sep, rest = message.removeprefix("Value error, ").partition(": ")
        loc, message = (head, rest) if sep and " " not in head else ("record", message)
    return DataError(path, line, loc, message.removeprefix("Value error, "))


def parse_record(obj: dict[str, Any], path: str | Path, line: int | None) -> Record:
    """Validate one decoded line as a `Record`, or raise a located `DataError`."""
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
    for line_number, _, raw in iter_binary_lines(path):
        yield line_number, decode_text(raw, path, line_number)


def iter_records(
    path: str | Path,
    *,
    skip_invalid: bool = False,
    rejects: RejectLog | None = None,
    unique_ids: bool = True,
) -> Iterator[Record]:
    """Stream validated records from a JSONL file.

    Without ``skip_invalid`` the first bad line raises `DataError`. With it, bad lines
    are handed to ``rejects`` (with their reason) and reading goes on. A repeated record id
    is a bad line unless ``unique_ids`` is off (statistics count them instead).
    """
    path = Path(path)
    seen: dict[str, int] = {}
    for line_number, _, raw in iter_binary_lines(path):
        try:
            record = parse_record(decode_line(raw, path, line_number), path, line_number)
            if unique_ids:
                first = seen.setdefault(record.id, line_number)
                if first != line_number:
                    raise DataError(
                        path, line_number, "id", f"duplicate record id {record.id!r} (line {first})"
                    )
            yield record
        except DataError as error:
            if not skip_invalid:
                raise
            if rejects is not None:
                rejects.add(error, raw.decode("utf-8", "replace").rstrip("\r\n"))


def _dump(obj: dict[str, Any] | Record) -> str:
    data = obj.to_json_dict() if isinstance(obj, Record) else obj
    return json.dumps(data, ensure_ascii=False) + "\n"


def fault_point(label: str) -> None:
    """Deterministic crash injection for kill tests; free when the variables are unset.

    Every writer calls this after each record and before each rename. With
    ``DUALVIEW_FAULT_KILL_AT=N`` the process SIGKILLs itself at its N-th call (a seeded,
    reproducible kill point); with ``DUALVIEW_FAULT_LOG=FILE`` each call appends
    ``SCOPE<TAB>label`` to FILE (to count a run's points). With ``DUALVIEW_FAULT_SCOPE=NAME``
    only calls inside that scope count (a pipeline stage's name, see `fault_scope`).
    """
    kill_at = os.environ.get("DUALVIEW_FAULT_KILL_AT")
    log = os.environ.get("DUALVIEW_FAULT_LOG")
    if not kill_at and not log:
        return
    scope = os.environ.get("DUALVIEW_FAULT_SCOPE")
    if scope is not None and scope != _fault_state["scope"]:
        return
    _fault_state["calls"] += 1
    if log:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(fd, f"{_fault_state['scope']}\t{label}\n".encode())
        os.close(fd)
    if kill_at and _fault_state["calls"] == int(kill_at):
        os.kill(os.getpid(), signal.SIGKILL)


_fault_state: dict[str, Any] = {"calls": 0, "scope": ""}


def fault_scope(name: str) -> None:
    """Name the work that follows (a pipeline stage) for `fault_point`."""
    _fault_state["scope"] = name


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
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8") as handle:
        handle.write(text)


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

    def write(self, obj: dict[str, Any] | Record) -> None:
        assert self._handle is not None, "use AtomicJsonlWriter as a context manager"
        try:
            self._handle.write(_dump(obj))
        except OSError as exc:
            raise write_error(self.path, exc) from None
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
        try:
            self._handle.write(_dump(obj))
        except OSError as exc:
            raise write_error(self.path, exc) from None
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


def count_lines(path: str | Path) -> int:
    """Number of non-blank lines, streamed."""
    return sum(1 for _ in _iter_raw_lines(Path(path)))
