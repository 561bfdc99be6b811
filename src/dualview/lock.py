"""One writer per folder: an advisory lock (``fcntl.flock``) on a lock file naming its holder.

Two processes appending to the same run folder or synthesis cache would interleave lines and
overwrite each other's state. `exclusive` takes a non-blocking exclusive ``flock`` on a
lock file and writes ``{"pid", "host", "since"}`` into it; a second process gets a
`LockedError` (exit 2) naming the holder's pid and host instead of waiting.

The kernel drops a ``flock`` when its process dies, so a lock left by a killed process
(SIGKILL, power loss) is stale by construction: the next process takes it and overwrites the
holder information. The lock file itself stays (deleting it would let a third process lock a
different inode while the second still holds the old one).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dualview.errors import DataError, DualviewError, input_error

LOCK_FILE = ".dualview.lock"


class LockedError(DualviewError):
    """Another live process holds the lock of the folder (or file) this command writes.

    ``lock_path``: the lock file that is held.
    """

    def __init__(self, message: str, lock_path: Path | None = None) -> None:
        super().__init__(message)
        self.lock_path = lock_path


def read_holder(lock_path: Path) -> dict:
    """The holder information in a lock file (empty when unreadable or blank)."""
    try:
        holder = json.loads(lock_path.read_bytes() or b"{}")
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


@contextmanager
def exclusive(lock_path: str | Path, what: str = "folder") -> Iterator[dict]:
    """Hold ``lock_path`` for the block; yields this holder's ``{"pid", "host", "since"}``.

    Raises `LockedError` at once when a live process holds it.
    """
    lock_path = Path(lock_path)
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise input_error(lock_path, exc) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = read_holder(lock_path)
            pid, host = holder.get("pid", "?"), holder.get("host", "?")
            since = holder.get("since", "?")
            raise LockedError(
                f"{lock_path.parent}: {what} in use by another dualview process (pid {pid} on "
                f"{host}, since {since}); wait for it to finish or stop it, then rerun",
                lock_path,
            ) from None
        me = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        _write_holder(fd, lock_path, me)
        yield me
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def _write_holder(fd: int, lock_path: Path, holder: dict) -> None:
    """Write the holder information; a failed write (a full disk) is one located error."""
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode() + b"\n", 0)
        os.fsync(fd)
    except OSError as exc:
        raise DataError(lock_path, None, "lock", input_error(lock_path, exc).message) from None


def folder_lock(folder: str | Path, what: str = "run folder"):
    """`exclusive` on ``FOLDER/.dualview.lock``."""
    return exclusive(Path(folder) / LOCK_FILE, what)
