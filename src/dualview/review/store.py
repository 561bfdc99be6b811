"""The verdict file: one JSON line per verdict, appended under an exclusive lock, never rewritten.

Every verdict is appended and fsynced before the page is told it was saved, so killing the
server loses at most the verdict being typed. Several server processes (or browser tabs) may
write the same file: each append holds ``flock`` on ``FILE.lock`` for the duration of one line,
and a torn last line left by a killed writer is dropped by the next append
(`dualview.io.append.AppendJsonlWriter`; a complete last line without its newline is kept).
An append that fails (a full disk) leaves the file as it was. Readers never write: they skip
a torn last line. Relabelling an item appends a new line; the latest line per
(reviewer, item) counts.
"""

from __future__ import annotations

import fcntl
import re
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dualview.errors import DataError
from dualview.io.append import AppendJsonlWriter, iter_appended_lines

FAILURE_MODES = (
    "near_copy",  # near-copy of the original instruction
    "not_reversal",  # rewritten, but P+ would still be the answer
    "p_plus_relevant",  # P+ still relevant under the new instruction
    "n_star_not_relevant",  # N* not relevant under the new instruction
    "off_topic",  # ignores the query
    "unnatural",  # not something a user would write
    "other",
)
FAILURE_LABELS = {
    "near_copy": "near-copy of the original",
    "not_reversal": "not a reversal",
    "p_plus_relevant": "P+ still relevant",
    "n_star_not_relevant": "N* not relevant",
    "off_topic": "off-topic",
    "unnatural": "unnatural",
    "other": "other",
}
VERDICTS = ("valid", "invalid")
_REVIEWER = re.compile(r"[A-Za-z0-9_.@-]{1,64}")
MAX_NOTE = 2000


def check_reviewer(name: str) -> str:
    """A reviewer id: 1-64 letters, digits or ``_.@-`` (it appears in URLs and file lines)."""
    if not _REVIEWER.fullmatch(name or ""):
        raise ValueError("reviewer id: 1-64 characters from A-Z a-z 0-9 _ . @ -")
    return name


def make_verdict(
    item: dict[str, Any], reviewer: str, verdict: str, failure_mode: str | None, note: str
) -> dict[str, Any]:
    """A verdict line for ``item`` (an `ReviewItem.snapshot`); raises ValueError on bad
    fields. A failure mode is kept only for an invalid verdict."""
    check_reviewer(reviewer)
    if verdict not in VERDICTS:
        raise ValueError(f"verdict must be one of {VERDICTS}")
    if verdict == "invalid" and failure_mode not in (None, "", *FAILURE_MODES):
        raise ValueError(f"failure_mode must be one of {FAILURE_MODES}")
    if len(note) > MAX_NOTE:
        raise ValueError(f"note longer than {MAX_NOTE} characters")
    return {
        "verdict_id": uuid.uuid4().hex,
        "time": round(time.time(), 3),
        "reviewer": reviewer,
        "verdict": verdict,
        "failure_mode": (failure_mode or "other") if verdict == "invalid" else None,
        "note": note,
        **item,
    }


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def append_verdict(path: str | Path, verdict: dict[str, Any]) -> None:
    """Append one verdict line and fsync it, holding the file's lock."""
    path = Path(path)
    with _locked(path), AppendJsonlWriter(path) as writer:
        writer.write(verdict)


def read_verdicts(path: str | Path) -> list[dict[str, Any]]:
    """Every verdict line in file order. Reading never writes (no lock file either): a torn
    last line from a killed writer, or one still being appended, is skipped, not removed."""
    path = Path(path)
    if not path.exists():
        return []
    numbered = list(iter_appended_lines(path))
    for number, row in numbered:
        for field in ("item", "reviewer", "verdict"):
            if not isinstance(row.get(field), str):
                raise DataError(path, number, field, "missing or not a string")
        if row["verdict"] not in VERDICTS:
            raise DataError(path, number, "verdict", f"must be one of {VERDICTS}")
    return [row for _, row in numbered]


def latest_verdicts(path: str | Path) -> list[dict[str, Any]]:
    """The last verdict of every (reviewer, item), in order of first appearance."""
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for row in read_verdicts(path):
        latest[(row["reviewer"], row["item"])] = row
    return list(latest.values())
