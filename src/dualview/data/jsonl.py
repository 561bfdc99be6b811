"""Streaming records from JSONL: validated `Record` objects with line-numbered errors.

Reading never loads a whole file (`iter_records` is a generator over lines); a bad line is a
`DataError` naming the file, line and field, or, with ``skip_invalid``, goes to a
`RejectLog`. The file readers and writers underneath live in `dualview.io`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from dualview.data.schema import Record
from dualview.errors import DataError
from dualview.io.files import decode_line, iter_binary_lines


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
    for _, record in iter_numbered_records(
        path, skip_invalid=skip_invalid, rejects=rejects, unique_ids=unique_ids
    ):
        yield record


def iter_numbered_records(
    path: str | Path,
    *,
    skip_invalid: bool = False,
    rejects: RejectLog | None = None,
    unique_ids: bool = True,
) -> Iterator[tuple[int, Record]]:
    """`iter_records` with each record's 1-based line number: ``(line, record)``."""
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
            yield line_number, record
        except DataError as error:
            if not skip_invalid:
                raise
            if rejects is not None:
                rejects.add(error, raw.decode("utf-8", "replace").rstrip("\r\n"))
