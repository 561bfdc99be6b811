"""Errors that the CLI turns into one clear line and exit code 2 (no traceback)."""

from __future__ import annotations

import errno
import sys
from pathlib import Path


class DualviewError(Exception):
    """Base class of user-facing errors: bad input, bad config, a missing resource."""

    exit_code = 2


class DataError(DualviewError):
    """A problem at a known place in an input file: ``FILE:LINE: field: message``."""

    def __init__(self, path: str | Path, line: int | None, field: str, message: str) -> None:
        self.path = str(path)
        self.line = line
        self.field = field
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.field}: {self.message}"


class ConfigError(DualviewError):
    """A configuration file (YAML) that does not match its schema."""


class Interrupted(DualviewError):
    """A long job stopped on request (SIGTERM) after saving its state; rerun to resume."""

    exit_code = 143


# What an OS error means to someone who named the path (strerror is too terse for some).
_OS_REASONS = {
    errno.ENOENT: "does not exist",
    errno.EISDIR: "is a directory (a file expected)",
    errno.ENOTDIR: "a parent of this path is not a directory",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ELOOP: "symlink loop (too many levels of symbolic links)",
    errno.ENOSPC: "no space left on the device",
    errno.EIO: "input/output error",
}


def input_error(path: str | Path, exc: OSError) -> DataError:
    """An `OSError` about ``path`` as a one-line `DataError` (``PATH: file: ...``)."""
    reason = _OS_REASONS.get(exc.errno or -1) or exc.strerror or type(exc).__name__
    return DataError(path, None, "file", reason)


def write_error(path: str | Path, exc: OSError) -> DataError:
    """A failed write (disk full, I/O error) of ``path``: the previous file is left as it was."""
    reason = _OS_REASONS.get(exc.errno or -1) or exc.strerror or type(exc).__name__
    return DataError(path, None, "write", f"{reason}; the previous file is unchanged")


_warned: set[str] = set()


def warn_once(message: str) -> None:
    """Print ``message`` on stderr the first time it is seen in this process."""
    if message not in _warned:
        _warned.add(message)
        print(message, file=sys.stderr, flush=True)
