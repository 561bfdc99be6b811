"""Where an adapter's rows come from: a JSONL file, or a ``datasets`` source streamed.

A *dataset source* is read with ``datasets.load_dataset(..., streaming=True)``, one row at a
time (local files: pyarrow record batches), so a source of millions of rows is never held
in memory. It is any of:

- a local Parquet or Arrow file (``.parquet``, ``.arrow``), or a folder holding such files
  (searched recursively, read in sorted path order; a ``save_to_disk`` folder included);
- ``hf://datasets/OWNER/NAME`` (the Hub repository) or ``hf://datasets/OWNER/NAME/PATH``
  where PATH names Parquet/Arrow files or a glob of them;
- a bare Hub id ``OWNER/NAME`` that is not a local path.

Rows are numbered from 1 in reading order; errors name the source and that row number where
a JSONL error would name the line. Hub sources read the ``train`` split unless told otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dualview.errors import DualviewError
from dualview.io.files import iter_json_lines

HF_PREFIX = "hf://"
BATCH_ROWS = 1000
FILE_BUILDERS = {".parquet": "parquet", ".arrow": "arrow"}
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
NOT_HUB_SUFFIXES = (".jsonl", ".json", ".gz", ".tsv", ".csv", ".txt", ".yaml", ".yml")

Rows = Iterator[tuple[int, dict[str, Any]]]


def normalize(source: str | Path) -> str:
    """The source as text; ``Path("hf://x")`` collapses to ``hf:/x``, which is undone."""
    text = str(source)
    if text.startswith("hf:/") and not text.startswith(HF_PREFIX):
        text = HF_PREFIX + text[len("hf:/") :]
    return text


def _data_files(folder: Path) -> tuple[str, list[str]] | None:
    """The builder and sorted files of a folder of Parquet or Arrow files, else None."""
    for suffix, builder in FILE_BUILDERS.items():
        files = sorted(str(p) for p in folder.rglob(f"*{suffix}") if p.is_file())
        if files:
            return builder, files
    return None


def is_dataset_source(source: str | Path) -> bool:
    """True when ``source`` is read through ``datasets`` (see the module docstring)."""
    text = normalize(source)
    if text.startswith(HF_PREFIX):
        return True
    path = Path(text)
    if path.is_dir():
        return _data_files(path) is not None
    if path.exists():
        return path.suffix in FILE_BUILDERS
    return bool(HUB_ID.match(text)) and not text.endswith(NOT_HUB_SUFFIXES)


def _load_arguments(text: str, split: str) -> dict[str, Any]:
    """``load_dataset`` keyword arguments for a Hub source."""
    if text.startswith(HF_PREFIX):
        parts = text.removeprefix(HF_PREFIX + "datasets/").split("/")
        if len(parts) > 2:  # files inside a repository
            suffix = Path(parts[-1]).suffix
            builder = FILE_BUILDERS.get(suffix, "parquet")
            return {"path": builder, "data_files": {split: text}, "split": split}
        text = "/".join(parts)
    return {"path": text, "split": split}


def _local_files(text: str) -> tuple[str, list[str]] | None:
    path = Path(text)
    if not path.exists():
        return None
    return _data_files(path) if path.is_dir() else (FILE_BUILDERS[path.suffix], [text])


def _arrow_batches(file: str) -> Iterator[Any]:
    """Record batches of an Arrow IPC file, stream format (``save_to_disk``) or file format."""
    import pyarrow as pa

    with pa.memory_map(file) as mapped:
        try:
            yield from pa.ipc.open_stream(mapped)
        except pa.ArrowInvalid:
            mapped.seek(0)
            reader = pa.ipc.open_file(mapped)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)


def _iter_local(builder: str, files: list[str]) -> Iterator[dict[str, Any]]:
    """Rows of local Parquet/Arrow files, ``BATCH_ROWS`` at a time (bounded memory)."""
    import pyarrow.parquet as pq

    for file in files:
        if builder == "parquet":
            batches = pq.ParquetFile(file).iter_batches(batch_size=BATCH_ROWS)
        else:
            batches = _arrow_batches(file)
        for batch in batches:
            for lo in range(0, batch.num_rows, BATCH_ROWS):
                yield from batch.slice(lo, BATCH_ROWS).to_pylist()


def iter_dataset_rows(source: str | Path, split: str = "train") -> Rows:
    """Stream ``(row_number, row)`` from a dataset source, 1-based, in reading order.

    Local files are read with pyarrow in batches of ``BATCH_ROWS`` rows (``datasets``'
    streaming reader held about 200 MiB more on a 50k-row file); Hub sources go through
    ``datasets.load_dataset(..., streaming=True)``.
    """
    text = normalize(source)
    try:
        local = _local_files(text)
        if local is not None:
            yield from enumerate(_iter_local(*local), start=1)
            return
        import datasets  # heavy: only when a Hub source is read

        stream = datasets.load_dataset(**_load_arguments(text, split), streaming=True)
        yield from enumerate(stream, start=1)
    except DualviewError:
        raise
    except Exception as exc:  # datasets/pyarrow/hub errors: one line naming the source
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DualviewError(f"{text}: cannot read dataset source: {message}") from None


def iter_rows(source: str | Path) -> Rows:
    """Rows of a JSONL file (numbered by line) or of a dataset source (numbered by row)."""
    if is_dataset_source(source):
        return iter_dataset_rows(source)
    return iter_json_lines(source)
