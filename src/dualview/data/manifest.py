"""Manifests: the JSON file beside a training file that traces it to its data.

``<training file>.manifest.json`` holds what built the file (stage, config, seed), the counts
per view, the source files with their sha256, and the output's own sha256. ``dualview mix``
and ``dualview mine`` write one; the trainer copies it into the saved model folder.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from dualview.errors import DataError
from dualview.io.atomic import atomic_write_json
from dualview.io.files import read_json_file

SUFFIX = ".manifest.json"


def manifest_path(training_file: str | Path) -> Path:
    """``<training file>.manifest.json``."""
    path = Path(training_file)
    return path.with_name(path.name + SUFFIX)


def file_sha256(path: str | Path, block: int = 1 << 20) -> str:
    """sha256 of a file's bytes, streamed."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while chunk := handle.read(block):
            digest.update(chunk)
    return digest.hexdigest()


def source_entry(path: str | Path, sha256: str | None = None) -> dict[str, Any]:
    """``{"path", "sha256", "bytes"}`` of one input file (hashes it unless given)."""
    path = Path(path)
    return {
        "path": str(path),
        "sha256": sha256 or file_sha256(path),
        "bytes": path.stat().st_size,
    }


def write_manifest(training_file: str | Path, data: dict[str, Any]) -> Path:
    """Write ``data`` to the manifest of ``training_file`` atomically; returns its path."""
    target = manifest_path(training_file)
    atomic_write_json(target, data)
    return target


def read_manifest(training_file: str | Path) -> dict[str, Any] | None:
    """The manifest of ``training_file``, or ``None`` when there is none."""
    target = manifest_path(training_file)
    if not target.exists():
        return None
    data = read_json_file(target)
    if not isinstance(data, dict):
        raise DataError(target, None, "json", "a manifest must be a JSON object")
    return data
