"""Whole output folders replaced in one step: a saved model, a Hub dataset, an HF dataset.

`atomic_dir` is the folder counterpart of `dualview.io.atomic.atomic_path`. The writer
fills a temporary folder beside the target. Every file in it is fsynced, and then it takes
the target's place:

- on Linux, with ``renameat2(RENAME_EXCHANGE)``, the old and new folders swap in one atomic
  step;
- elsewhere, the old folder is first renamed to ``.NAME.old``. A crash between the two
  renames leaves it there, and the next writer of the same target puts it back.

A reader therefore sees either the previous complete folder or the new complete one, never
a mix or a missing folder. A failed or killed writer leaves the previous folder as it was.

`staging_dir` is the scratch folder a writer builds in before `atomic_dir` (a model saved
once so that sentence-transformers can load it and save it in its own layout). It too lies
beside the target, on the target's file system rather than in ``/tmp``, which may be a small
RAM disk where a large model does not fit, and what a killed writer left there is removed by
the next writer of the same target instead of staying in ``/tmp`` for good.
"""

from __future__ import annotations

import ctypes
import errno
import glob
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dualview.errors import DualviewError, write_error
from dualview.io.atomic import fsync_path
from dualview.io.faults import fault_point

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_UNSUPPORTED = {errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EPERM}
_TMPDIR = ".tmpdir"  # atomic_dir's folder, swapped in
_STAGING = ".staging"  # staging_dir's folder, removed on exit
_NATIVE_OS_ERROR = re.compile(r"\(os error (\d+)\)")


@contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """A temporary folder beside ``path`` that replaces the folder ``path`` on success.

    OS errors (a full disk included) become a one-line `DataError` naming ``path``; on any
    error the temporary folder is removed and ``path`` keeps its previous contents.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _recover(path)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=_TMPDIR, dir=path.parent))
    except OSError as exc:
        raise write_error(path, exc) from None
    try:
        yield tmp
        _fsync_tree(tmp)
        fault_point(f"replace {path.name}/")
        _swap_in(tmp, path)
    except BaseException as exc:
        _remove(tmp)
        _raise_as_write_error(path, exc)
        raise


@contextmanager
def staging_dir(path: str | Path) -> Iterator[Path]:
    """A scratch folder beside ``path``, removed on exit, for files built and read back
    before ``path`` is written (see module docstring). Entering it first removes the staging
    folders a killed writer of ``path`` left. OS errors become a one-line `DataError`
    naming ``path``.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_leftovers(path, _STAGING)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=_STAGING, dir=path.parent))
    except OSError as exc:
        raise write_error(path, exc) from None
    try:
        yield tmp
    except BaseException as exc:
        _raise_as_write_error(path, exc)
        raise
    finally:
        _remove(tmp)


def _raise_as_write_error(path: Path, exc: BaseException) -> None:
    """Raise the `write_error` of ``path`` when ``exc`` is a failed write: an `OSError`, or
    a native library's error that carries one only in its message (safetensors' Rust
    ``SafetensorError: ... I/O error: No space left on device (os error 28)``, what a full
    disk gives while a model is saved). Any other exception: return."""
    if isinstance(exc, OSError):
        raise write_error(path, exc) from None
    found = None if isinstance(exc, DualviewError) else _NATIVE_OS_ERROR.search(str(exc))
    if found:
        code = int(found.group(1))
        raise write_error(path, OSError(code, os.strerror(code))) from None


def _aside(path: Path) -> Path:
    return path.with_name(f".{path.name}.old")


def _recover(path: Path) -> None:
    """Undo what a killed writer of ``path`` left: its temporaries and a folder set aside."""
    _remove_leftovers(path, _TMPDIR)
    aside = _aside(path)
    if aside.exists():
        if path.exists():
            _remove(aside)
        else:
            os.rename(aside, path)


def _remove_leftovers(path: Path, suffix: str) -> None:
    """Remove what killed writers of ``path`` left beside it: ``.NAME.*SUFFIX``."""
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*{suffix}"):
        _remove(stale)


def _swap_in(tmp: Path, path: Path) -> None:
    if not (path.exists() or path.is_symlink()):
        os.rename(tmp, path)
    elif _exchange(tmp, path):
        _remove(tmp)  # it now holds the previous folder
    else:
        aside = _aside(path)
        os.rename(path, aside)
        fault_point(f"set aside {path.name}/")
        os.rename(tmp, path)
        _remove(aside)
    fsync_path(path.parent)


def _exchange(a: Path, b: Path) -> bool:
    """Swap ``a`` and ``b`` atomically; False where the OS or file system cannot."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    done = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if done == 0:
        return True
    code = ctypes.get_errno()
    if code in _UNSUPPORTED:
        return False
    raise OSError(code, os.strerror(code), str(b))


def _fsync_tree(root: Path) -> None:
    for folder, _, files in os.walk(root):
        for name in files:
            fsync_path(Path(folder) / name)
        fsync_path(Path(folder))


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
