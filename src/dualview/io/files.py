"""Reading users' files: one way in, streamed, with located errors.

Every user file is opened by `open_input` (a missing path, a folder, an unreadable file or
a symlink loop is one `DataError` line) and read as lines (`iter_binary_lines`: streamed,
a UTF-8 BOM skipped, a line longer than `MAX_LINE_BYTES` rejected) or whole
(`read_input_text`, `read_json_file`: a UTF-8 BOM dropped, CRLF read as LF, a file larger
than `MAX_FILE_BYTES` rejected before it is read). JSON is strict: ``NaN`` and ``Infinity``
are errors, and so is a lone surrogate escape (``"\\ud800"``: not Unicode text, which no
writer could encode), named with its field (`reject_lone_surrogates`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from dualview.errors import DataError, input_error


def iter_json_lines(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for every non-blank line; 1-based line numbers.

    Raises `DataError` naming the file and line for invalid JSON or a non-object line.
    """
    path = Path(path)
    for line_number, line in iter_text_lines(path):
        yield line_number, decode_line(line, path, line_number)


# The longest line any reader accepts: a longer one is an error, never a memory blow-up.
MAX_LINE_BYTES = int(os.environ.get("DUALVIEW_MAX_LINE_BYTES", 32 << 20))
# The largest file read whole (a YAML config, a JSON index, manifest or card): larger is an
# error before anything is read. Record files are streamed line by line instead.
MAX_FILE_BYTES = int(os.environ.get("DUALVIEW_MAX_FILE_BYTES", 64 << 20))


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
    """A whole (small) user file as text: BOM dropped, CRLF as LF, errors located.

    A file larger than `MAX_FILE_BYTES` is a `DataError` before it is read (its size as the
    file system reports it; a device or pipe is cut off after `MAX_FILE_BYTES` + 1 bytes).
    """
    path = Path(path)
    with open_input(path) as handle:
        try:
            _check_size(path, os.fstat(handle.fileno()).st_size)
            raw = handle.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise input_error(path, exc) from None
    _check_size(path, len(raw))
    return decode_text(raw.removeprefix(BOM), path, None).replace("\r\n", "\n")


def _check_size(path: Path, size: int) -> None:
    if size > MAX_FILE_BYTES:
        limit = f"{MAX_FILE_BYTES / (1 << 20):g} MiB"
        raise DataError(path, None, "file", f"larger than {limit} (DUALVIEW_MAX_FILE_BYTES)")


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
    reject_lone_surrogates(line, obj, path, line_number)
    return obj


def read_json_file(path: str | Path) -> Any:
    """A whole JSON file (a stats, index or results file), strict, with located errors."""
    path = Path(path)
    text = read_input_text(path)
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise DataError(path, exc.lineno, "json", f"invalid JSON ({exc.msg})") from None
    except (ValueError, RecursionError) as exc:
        raise DataError(path, None, "json", f"invalid JSON ({exc})") from None
    reject_lone_surrogates(text, data, path, None)
    return data


# A JSON or YAML escape of a UTF-16 surrogate (U+D800-U+DFFF). It only preselects the texts
# to check: a valid pair (an emoji) matches too, and only a lone one is an error.
_SURROGATE_ESCAPE = re.compile(r"\\(?:u|U0000)[dD][89a-fA-F]")
# A surrogate code point in a decoded str: decoding joins escaped pairs, so it is a lone one.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def reject_lone_surrogates(text: str, data: Any, path: str | Path, line: int | None) -> None:
    """A `DataError` naming the field when ``data`` (decoded from ``text``) holds a lone
    surrogate: JSON and YAML can escape one (``"\\ud800"``), but it is not Unicode text,
    so no later stage could write or tokenize it. Every JSON and YAML reader calls this."""
    if _SURROGATE_ESCAPE.search(text) is None:
        return
    found = find_lone_surrogate(data)
    if found is not None:
        field, code = found
        message = f"lone surrogate \\u{code:04x} is not Unicode text (write the character)"
        raise DataError(path, line, field or "json", message)


def find_lone_surrogate(data: Any) -> tuple[str, int] | None:
    """``(dotted path, code point)`` of the first lone surrogate in ``data``'s strings and
    keys (a key's own path ends in ``(key)``), or None. Iterative: any nesting depth."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, str):
            code = _surrogate_in(node)
            if code is not None:
                return where, code
        elif isinstance(node, dict):
            children = []
            for key, value in node.items():
                code = _surrogate_in(key) if isinstance(key, str) else None
                if code is not None:
                    return _join(where, "(key)"), code
                children.append((_join(where, key), value))
            stack.extend(reversed(children))
        elif isinstance(node, list):
            stack.extend(reversed([(_join(where, i), v) for i, v in enumerate(node)]))
    return None


def _join(where: str, key: object) -> str:
    return f"{where}.{key}" if where else str(key)


def replace_lone_surrogates(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD. For text dualview did not read
    from a user's file (an LLM server's reply): it cannot be located to a line, and one bad
    character must not stop a job whose cache and output could not be written otherwise."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def _surrogate_in(text: str) -> int | None:
    found = _LONE_SURROGATE.search(text)
    return ord(found.group()) if found else None


def iter_text_lines(path: Path) -> Iterator[tuple[int, str]]:
    for line_number, _, raw in iter_binary_lines(path):
        yield line_number, decode_text(raw, path, line_number)


def count_lines(path: str | Path) -> int:
    """Number of non-blank lines, streamed."""
    return sum(1 for _ in iter_text_lines(Path(path)))
