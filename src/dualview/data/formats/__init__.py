"""Format adapters: other projects' training/eval layouts in and out of `Record`.

Each adapter module exposes ``read(path, **options) -> Iterator[Record]`` and/or
``write(records, path, **options) -> int``. `READERS` and `WRITERS` map the
format names the CLI accepts to those functions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from dualview.data import jsonl
from dualview.data.formats import beir, infir, parquet, promptriever, st, tevatron
from dualview.data.schema import Record
from dualview.errors import DualviewError
from dualview.io.atomic import write_jsonl

Reader = Callable[..., Iterator[Record]]
Writer = Callable[..., int]


def _read_native(path: str | Path, **options: Any) -> Iterator[Record]:
    return jsonl.iter_records(path, **options)


def _write_native(records: Iterable[Record], path: str | Path) -> int:
    return write_jsonl(path, records)


READERS: dict[str, Reader] = {
    "dualview": _read_native,
    "promptriever": promptriever.read,
    "tevatron": tevatron.read,
    "beir": beir.read,
    "infir": infir.read,
    "st": st.read,
    "parquet": parquet.read,
}

WRITERS: dict[str, Writer] = {
    "dualview": _write_native,
    "tevatron": tevatron.write,
    "st": st.write,
    "parquet": parquet.write,
}


def get_reader(name: str) -> Reader:
    if name not in READERS:
        raise DualviewError(f"unknown input format {name!r}; choose from {sorted(READERS)}")
    return READERS[name]


def get_writer(name: str) -> Writer:
    if name not in WRITERS:
        raise DualviewError(f"unknown output format {name!r}; choose from {sorted(WRITERS)}")
    return WRITERS[name]
