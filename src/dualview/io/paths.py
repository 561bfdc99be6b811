"""Outputs that must not be inputs: one check for every command that writes a file or folder.

A command that writes ``-o g.jsonl`` while reading ``g.jsonl`` (or a symlink to it, or a hard
link) destroys its input, and an append-only cache that is the input corrupts it. Every
command therefore calls `check_outputs` with the paths it will write and the paths it reads,
before anything is written. Paths are compared after resolving symlinks (`os.path.realpath`,
which never raises on a symlink loop) and, where both exist, by device and inode
(`os.path.samefile`), so hard links and case-insensitive file systems are caught too.

An output clashes with an input when it

- is the input (same file or folder);
- lies inside an input folder (a BEIR folder, a model folder): it could be one of its files;
- is a folder replaced as a whole (``replaced=True``, the default: a file, an export folder)
  that holds the input.

Two outputs of one command that are the same path clash as well (``--llm-cache OUT``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from dualview.errors import DataError

PathLike = str | os.PathLike[str]


def _real(path: PathLike) -> str:
    return os.path.realpath(os.fspath(path))


def same_path(a: PathLike, b: PathLike) -> bool:
    """Whether ``a`` and ``b`` name the same file or folder (symlinks and hard links too)."""
    if _real(a) == _real(b):
        return True
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # one of them does not exist (yet)
        return False


def is_inside(path: PathLike, folder: PathLike) -> bool:
    """Whether ``path`` lies strictly below ``folder``, symlinks resolved."""
    inner, outer = _real(path), _real(folder)
    return inner != outer and inner.startswith(outer.rstrip(os.sep) + os.sep)


def _clash(output: PathLike, source: PathLike, replaced: bool) -> str | None:
    """Why writing ``output`` would damage the input ``source`` (None: it would not)."""
    if same_path(output, source):
        return f"is the input {source}"
    if os.path.isdir(source) and is_inside(output, source):
        return f"lies inside the input folder {source}"
    if replaced and is_inside(source, output):
        return f"would replace the folder that holds the input {source}"
    return None


def check_outputs(
    outputs: Iterable[PathLike | None],
    inputs: Iterable[PathLike | None],
    *,
    replaced: bool = True,
) -> None:
    """Raise a `DataError` (``OUT: output: is the input IN (...)``) when one of ``outputs``
    clashes with one of ``inputs`` or with another output (module docstring). ``None`` entries
    (options not given) are skipped. ``replaced=False``: the outputs are folders that the
    command only adds files to (an eval or report folder), so they may hold inputs."""
    written = [Path(p) for p in outputs if p is not None]
    sources = [Path(p) for p in inputs if p is not None]
    for i, output in enumerate(written):
        for source in sources:
            reason = _clash(output, source, replaced)
            if reason is not None:
                raise DataError(
                    output, None, "output", f"{reason} (symlinks resolved); write it elsewhere"
                )
        for other in written[i + 1 :]:
            if same_path(output, other):
                raise DataError(
                    output, None, "output", f"is also the output {other}; give two paths"
                )
