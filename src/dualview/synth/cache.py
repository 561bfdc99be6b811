"""The synthesis result cache: append-only JSONL, content-addressed by unit key.

Each line is ``{"key", "unit", "outcome"}``. A unit's key hashes everything its answer
depends on (task, template, task settings, model identity, sampling settings, the unit's
records), so a killed run resumes where it stopped and a rerun with the same settings costs
nothing. Lines are flushed to the OS as they are written (a kill loses nothing written) and
fsynced every ``sync_every`` lines; a torn last line is dropped on open. The first entry of a
key wins, so a repeated key can never change or duplicate a result.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, BinaryIO

from dualview.data.schema import Record
from dualview.errors import warn_once
from dualview.io.append import AppendJsonlWriter
from dualview.synth.task import Outcome


def job_fingerprint(parts: dict[str, Any]) -> str:
    """Hash of the settings shared by every unit of a job."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def unit_key(fingerprint: str, unit: list[Record]) -> str:
    """Content address of one unit under one job."""
    payload = json.dumps([r.to_json_dict() for r in unit], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(f"{fingerprint}\n{payload}".encode()).hexdigest()


class ResultCache:
    """Index of the cache file (key -> byte offset, status) plus an appender for new results."""

    def __init__(self, path: str | Path, sync_every: int = 64) -> None:
        self.path = Path(path)
        self._writer = AppendJsonlWriter(self.path, sync_every=sync_every)  # repairs a torn tail
        self.index: dict[str, tuple[int, str]] = {}
        self._reader: BinaryIO | None = None
        self._peeker: BinaryIO | None = None
        self._scan()
        self.found_on_open = len(self.index)  # entries of earlier runs (0: a fresh cache)

    def _scan(self) -> None:
        offset = 0
        damaged = 0
        with self.path.open("rb") as handle:
            for line in handle:
                try:
                    entry = json.loads(line)
                    key, status = entry["key"], Outcome.from_json(entry["outcome"]).status
                    if not isinstance(key, str):
                        raise TypeError("key")
                except (ValueError, KeyError, TypeError, AttributeError):
                    key = None  # an unreadable line is ignored: its unit is simply redone
                    damaged += 1
                if key is not None and key not in self.index:
                    self.index[key] = (offset, status)
                offset += len(line)
        if damaged:
            warn_once(f"warning: {self.path}: {damaged} damaged line(s) ignored; redoing them")

    def __contains__(self, key: str) -> bool:
        return key in self.index

    def __len__(self) -> int:
        return len(self.index)

    def status(self, key: str) -> str:
        return self.index[key][1]

    def put(self, key: str, unit_id: str, outcome: Outcome) -> None:
        """Append a result (ignored when the key already has one)."""
        if key in self.index:
            return
        self._writer.write({"key": key, "unit": unit_id, "outcome": outcome.to_json()})
        self._writer.flush()
        self.index[key] = (-1, outcome.status)  # offset known after reopening

    def peek(self, key: str) -> Outcome | None:
        """An entry found when the cache was opened (readable while appending), else None."""
        offset = self.index[key][0] if key in self.index else -1
        if offset < 0:
            return None
        if self._peeker is None:
            self._peeker = self.path.open("rb")
        self._peeker.seek(offset)
        return Outcome.from_json(json.loads(self._peeker.readline())["outcome"])

    def close(self) -> None:
        self._writer.close()
        for handle in (self._reader, self._peeker):
            if handle is not None:
                handle.close()
        self._reader = self._peeker = None

    def reopen(self) -> None:
        """Close the appender and re-read the offsets of every entry, for `get`."""
        self.close()
        self.index.clear()
        self._scan()
        self._reader = self.path.open("rb")

    def get(self, key: str) -> Outcome:
        offset = self.index[key][0]
        if offset < 0 or self._reader is None:
            raise RuntimeError("ResultCache.get needs reopen() after writing")
        self._reader.seek(offset)
        return Outcome.from_json(json.loads(self._reader.readline())["outcome"])
