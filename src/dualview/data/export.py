"""Export an assembled training file for other trainers: Parquet, HF ``datasets``, ST columns.

Formats (``to``):

- ``parquet``: the full record schema (`dualview.data.formats.parquet`).
- ``st-parquet``: sentence-transformers columns ``anchor``, ``positive``, ``negative_1`` …
  ``negative_k`` (`dualview.data.formats.st`). A Parquet table needs the same columns in
  every row, so ``k`` defaults to the smallest negative count in the file; rows with fewer
  than an explicit ``k`` are skipped and counted.
- ``hf`` / ``hf-st``: the same tables loaded as a Hugging Face ``datasets.Dataset`` and saved
  with ``save_to_disk`` (load back with ``datasets.load_from_disk``).

The manifest of the source (``<file>.manifest.json``) is carried along: beside a Parquet file
as ``<out>.manifest.json``, inside a dataset folder as ``manifest.json``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.parquet as pq

from dualview.data.formats import parquet, st
from dualview.data.jsonl import iter_records
from dualview.data.manifest import manifest_path
from dualview.errors import DualviewError
from dualview.io.atomic import atomic_copy
from dualview.io.folder import atomic_dir, staging_dir

ExportFormat = Literal["parquet", "st-parquet", "hf", "hf-st"]
EXPORT_FORMATS: tuple[str, ...] = ("parquet", "st-parquet", "hf", "hf-st")


@dataclass
class ExportResult:
    path: Path
    rows: int
    skipped: int = 0
    negative_columns: int | None = None


def min_negatives(source: str | Path) -> int:
    """Smallest number of negatives of any record in ``source`` (0 for an empty file)."""
    counts = [len(r.negatives()) for r in iter_records(source)]
    return min(counts) if counts else 0


def write_st_parquet(
    source: str | Path, out: str | Path, negatives: int | None = None, batch_size: int = 2048
) -> ExportResult:
    """ST columns with exactly ``negatives`` negative columns (default: the file's minimum)."""
    k = min_negatives(source) if negatives is None else negatives
    schema = pa.schema(
        [("anchor", pa.string()), ("positive", pa.string())]
        + [(f"negative_{i}", pa.string()) for i in range(1, k + 1)]
    )
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    rows, skipped, buffer = 0, 0, []
    with pq.ParquetWriter(tmp, schema) as writer:
        for record in iter_records(source):
            if len(record.negatives()) < k:
                skipped += 1
                continue
            buffer.append(st.to_row(record, max_negatives=k))
            if len(buffer) >= batch_size:
                writer.write_table(pa.Table.from_pylist(buffer, schema=schema))
                rows, buffer = rows + len(buffer), []
        writer.write_table(pa.Table.from_pylist(buffer, schema=schema))
        rows += len(buffer)
    tmp.replace(out)
    return ExportResult(out, rows, skipped, k)


def _save_dataset(parquet_file: Path, source: Path, out: Path) -> None:
    from datasets import Dataset

    with atomic_dir(out) as tmp:  # the previous export stays whole until this one is
        Dataset.from_parquet(str(parquet_file)).save_to_disk(str(tmp))
        _copy_manifest(source, tmp / "manifest.json")


def export(
    source: str | Path, out: str | Path, to: str = "parquet", negatives: int | None = None
) -> ExportResult:
    """Export the records JSONL ``source`` to ``out`` in format ``to`` (see module docstring)."""
    source, out = Path(source), Path(out)
    if to not in EXPORT_FORMATS:
        raise DualviewError(f"unknown export format {to!r}; choose from {list(EXPORT_FORMATS)}")
    if to in ("parquet", "st-parquet"):
        result = _write_table(source, out, to, negatives)
        _copy_manifest(source, manifest_path(out))
        return result
    with staging_dir(out) as tmp:
        table = tmp / "table.parquet"
        result = _write_table(source, table, "parquet" if to == "hf" else "st-parquet", negatives)
        _save_dataset(table, source, out)
    result.path = out
    return result


def _write_table(source: Path, out: Path, to: str, negatives: int | None) -> ExportResult:
    if to == "st-parquet":
        return write_st_parquet(source, out, negatives)
    rows = parquet.write(iter_records(source), out)
    return ExportResult(out, rows)


def _copy_manifest(source: Path, target: Path) -> None:
    manifest = manifest_path(source)
    if manifest.exists():
        atomic_copy(manifest, target)


def iter_exported(path: str | Path) -> Iterator[dict]:
    """Rows of an exported Parquet file as dicts (for inspection and tests)."""
    for batch in pq.ParquetFile(path).iter_batches():
        yield from batch.to_pylist()
