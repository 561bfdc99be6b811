"""Errors that the CLI turns into one clear line and exit code 2 (no traceback)."""

from __future__ import annotations

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
